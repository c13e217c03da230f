// The replay page's first check of its receipt, inlined in <head> so it runs
// before the wasm has even started downloading. It fetches the receipt file
// the page links (the wasm reuses those bytes: window.kvwReceipt) and checks
// it with WebCrypto (receipt_verify.js: its SHA-256 is the SHA256SUMS entry
// the page was built with, its DSSE signature verifies with the bundle's
// ed25519 key). The verdict lands on <html> as data-kvw-early = ok | bad |
// unsupported; the style sheet shows the badge (or the warning) from it,
// and the wasm verifier, when it has run, refuses to show a receipt this
// check refused.
(() => {
  const root = document.documentElement;
  if (/[?&]receipt=/.test(location.search)) return;
  const data = JSON.parse(document.getElementById("kvw-page").textContent);
  const url = data.root + "receipts/" + data.receipt + ".json";
  const bytes = window.kvwFetchBytes(url);
  window.kvwReceipt = bytes;
  window.kvwEarly = window
    .kvwVerifyReceipt(bytes, data.public_key, data.receipt_sha256)
    .catch(() => "bad")
    .then((verdict) => {
      root.dataset.kvwEarly = verdict;
      if (verdict === "ok") root.dataset.kvwBadgeMs = performance.now().toFixed(1);
      if (verdict === "bad") showReceived(bytes);
      return verdict;
    });
  // A file that failed shows the digest of the bytes that arrived, not the
  // one the page was built with.
  async function showReceived(bytes) {
    const got = Array.from(new Uint8Array(await crypto.subtle.digest("SHA-256", await bytes)), (x) => x.toString(16).padStart(2, "0")).join("");
    root.dataset.kvwReceivedSha256 = got;
    const put = () => {
      const digest = document.querySelector("#kvw-trust.built .digest");
      if (digest) {
        digest.textContent = got.slice(0, 16);
        digest.title = got;
      }
    };
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", put);
    else put();
  }
})();
