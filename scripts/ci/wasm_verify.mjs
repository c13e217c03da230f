// Verify a kvwitness bundle's receipts in Node with the evidence crate
// compiled to WebAssembly, the same code the browser explorer runs.
//
// Usage: node wasm_verify.mjs PKG_DIR BUNDLE_DIR
//   PKG_DIR     output of `wasm-bindgen --target nodejs` for kvw_evidence
//   BUNDLE_DIR  a bundle folder (receipts/*.json and kvw.pub.json)
//
// Every receipt must verify; a copy with one payload byte flipped and a
// copy with one signature byte flipped must both be refused. Exits 1 on any
// failure.

import { createRequire } from "node:module";
import { readFileSync, readdirSync } from "node:fs";
import path from "node:path";

const [pkgDir, bundleDir] = process.argv.slice(2);
if (!pkgDir || !bundleDir) {
  console.error("usage: node wasm_verify.mjs PKG_DIR BUNDLE_DIR");
  process.exit(2);
}

const require = createRequire(import.meta.url);
const { verify_statement_json } = require(path.resolve(pkgDir, "kvw_evidence.js"));

const key = readFileSync(path.join(bundleDir, "kvw.pub.json"), "utf8");
const receiptsDir = path.join(bundleDir, "receipts");
const files = readdirSync(receiptsDir).filter((f) => f.endsWith(".json")).sort();

function flip(base64, at, mask) {
  const bytes = Buffer.from(base64, "base64");
  bytes[at(bytes.length)] ^= mask;
  return bytes.toString("base64");
}

function verify(envelope) {
  return JSON.parse(verify_statement_json(JSON.stringify(envelope), key));
}

let failed = 0;
for (const file of files) {
  const rel = `receipts/${file}`;
  const text = readFileSync(path.join(receiptsDir, file), "utf8");
  const result = JSON.parse(verify_statement_json(text, key));
  const envelope = JSON.parse(text);

  const badPayload = structuredClone(envelope);
  badPayload.payload = flip(badPayload.payload, (n) => Math.floor(n / 2), 0x01);
  const badSig = structuredClone(envelope);
  badSig.signatures[0].sig = flip(badSig.signatures[0].sig, () => 10, 0x80);
  const tampered = [verify(badPayload), verify(badSig)];

  if (!result.ok) {
    failed++;
    console.log(`FAIL  ${rel}: ${result.error}`);
  } else if (tampered.some((r) => r.ok)) {
    failed++;
    console.log(`FAIL  ${rel}: a tampered copy was ACCEPTED`);
  } else {
    console.log(`ok    ${rel}  (wasm, keyid ${result.keyid.slice(0, 12)}…; tampered copies refused)`);
  }
}
if (files.length === 0) {
  failed++;
  console.log("FAIL  no receipts in the bundle");
}
console.log(`wasm: ${files.length - failed} of ${files.length} receipts ok`);
process.exit(failed ? 1 : 0);
