// The replay page's first check of its receipt, inlined in <head> so it runs
// before the wasm has even started downloading. It fetches the receipt file
// the page links (the wasm reuses those bytes: window.kvwReceipt), checks
// that its SHA-256 is the SHA256SUMS entry the page was built with and that
// the DSSE signature over the PAE encoding verifies with the bundle's
// ed25519 key, both through WebCrypto. The verdict lands on <html> as
// data-kvw-early = ok | bad | unsupported; the style sheet shows the badge
// (or the warning) from it, and the wasm verifier, when it has run, refuses
// to show a receipt this check refused.
(() => {
  const root = document.documentElement;
  if (/[?&]receipt=/.test(location.search)) return;
  const data = JSON.parse(document.getElementById("kvw-page").textContent);
  const url = data.root + "receipts/" + data.receipt + ".json";
  const bytes = fetch(url).then((r) => (r.ok ? r.arrayBuffer() : Promise.reject(new Error("HTTP " + r.status))));
  window.kvwReceipt = bytes;
  const subtle = window.crypto && crypto.subtle;
  const enc = new TextEncoder();
  const unhex = (s) => new Uint8Array(s.match(/../g).map((x) => parseInt(x, 16)));
  const hex = (b) => Array.from(new Uint8Array(b), (x) => x.toString(16).padStart(2, "0")).join("");
  const unb64 = (s) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
  const check = async () => {
    const pub = JSON.parse(data.public_key);
    // A browser without Ed25519 in WebCrypto leaves the verdict to the wasm.
    let key;
    try {
      key = await subtle.importKey("raw", unhex(pub.keyval.public), { name: "Ed25519" }, false, ["verify"]);
    } catch (e) {
      bytes.catch(() => {});
      return "unsupported";
    }
    const body = await bytes;
    if (hex(await subtle.digest("SHA-256", body)) !== data.receipt_sha256) return "bad";
    const envelope = JSON.parse(new TextDecoder().decode(body));
    if (envelope.payloadType !== "application/vnd.in-toto+json") return "bad";
    const payload = unb64(envelope.payload);
    const head = enc.encode("DSSEv1 " + enc.encode(envelope.payloadType).length + " " + envelope.payloadType + " " + payload.length + " ");
    const pae = new Uint8Array(head.length + payload.length);
    pae.set(head);
    pae.set(payload, head.length);
    const sig = envelope.signatures.find((s) => s.keyid === pub.keyid);
    return sig && (await subtle.verify({ name: "Ed25519" }, key, unb64(sig.sig), pae)) ? "ok" : "bad";
  };
  window.kvwEarly = check()
    .catch(() => "bad")
    .then((verdict) => {
      root.dataset.kvwEarly = verdict;
      if (verdict === "ok") root.dataset.kvwBadgeMs = performance.now().toFixed(1);
      return verdict;
    });
})();
