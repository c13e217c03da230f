// Until the browser build has hydrated the page (html.kvw-ready), Previous,
// Next and the arrow keys step the replay through #step-N: the style sheet
// shows the targeted step, and hydration starts on the step of the address.
(() => {
  const root = document.documentElement;
  const go = (delta) => {
    // Replay pages only (they have the stepper), and only until hydrated.
    if (root.classList.contains("kvw-ready") || !document.getElementById("kvw-next")) return false;
    const m = /^#step-([1-7])$/.exec(location.hash);
    const n = Math.min(7, Math.max(1, (m ? Number(m[1]) : 1) + delta));
    location.hash = "#step-" + n;
    const counter = document.getElementById("kvw-counter");
    if (counter) counter.textContent = counter.textContent.replace(/\d+(?= \/ 7)/, String(n));
    for (const [id, end] of [["kvw-prev", 1], ["kvw-next", 7]]) {
      const b = document.getElementById(id);
      if (!b) continue;
      if (n === end) b.setAttribute("aria-disabled", "true");
      else b.removeAttribute("aria-disabled");
    }
    return true;
  };
  document.addEventListener("click", (e) => {
    const b = e.target instanceof Element && e.target.closest("#kvw-next, #kvw-prev");
    if (b && go(b.id === "kvw-next" ? 1 : -1)) e.preventDefault();
  });
  document.addEventListener("keydown", (e) => {
    if (e.altKey || e.ctrlKey || e.metaKey || /^(INPUT|TEXTAREA|SELECT)$/.test(e.target.tagName)) return;
    const delta = e.key === "ArrowRight" ? 1 : e.key === "ArrowLeft" ? -1 : 0;
    if (delta && go(delta)) e.preventDefault();
  });
})();
