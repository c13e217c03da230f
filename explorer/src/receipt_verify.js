// One receipt file checked in the browser with WebCrypto, shared by the
// inline checks of every page kind (early_check.js on replay pages,
// results_check.js on the static result pages). `bytes` is a promise of the
// file's bytes as served, `publicKeyJson` the bundle's kvw.pub.json and
// `sha256` the file's SHA256SUMS entry the page was built with. Resolves to
// "ok" (digest and DSSE signature over the PAE encoding both check out),
// "bad", or "unsupported" (this browser's WebCrypto has no Ed25519).
// The bytes of `url` as served, or a rejection for an HTTP error.
window.kvwFetchBytes = (url) =>
  fetch(url).then((r) => (r.ok ? r.arrayBuffer() : Promise.reject(new Error("HTTP " + r.status))));
window.kvwVerifyReceipt = async (bytes, publicKeyJson, sha256) => {
  const subtle = window.crypto && crypto.subtle;
  const enc = new TextEncoder();
  const unhex = (s) => new Uint8Array(s.match(/../g).map((x) => parseInt(x, 16)));
  const hex = (b) => Array.from(new Uint8Array(b), (x) => x.toString(16).padStart(2, "0")).join("");
  const unb64 = (s) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
  const pub = JSON.parse(publicKeyJson);
  let key;
  try {
    key = await subtle.importKey("raw", unhex(pub.keyval.public), { name: "Ed25519" }, false, ["verify"]);
  } catch (e) {
    bytes.catch(() => {});
    return "unsupported";
  }
  const body = await bytes;
  if (hex(await subtle.digest("SHA-256", body)) !== sha256) return "bad";
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
