#!/usr/bin/env bash
# Check a kvwitness bundle with tools that are not kvw itself:
#   1. coreutils:        sha256sum -c SHA256SUMS inside the bundle;
#   2. securesystemslib: an independent DSSE/ed25519 implementation (Python);
#   3. WebAssembly:      the evidence crate built for wasm32 and run in Node,
#                        the code path the browser uses.
# Each verifies every receipt and must refuse tampered copies.
#
# Usage: scripts/ci/evidence-interop.sh BUNDLE_DIR
# Env:   KVW_CACHE (default ~/.cache/kvwitness) holds the Python venv.
#        WASM_BINDGEN (default: wasm-bindgen on PATH or ~/.cargo/bin) must be 0.2.130.
# Exits non-zero on the first failing stage.
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 BUNDLE_DIR" >&2
  exit 2
fi
bundle=$(cd "$1" && pwd)
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cache=${KVW_CACHE:-$HOME/.cache/kvwitness}
sslib_version=1.6.0
rfc8785_version=0.1.4

echo "== sha256sum -c SHA256SUMS"
(cd "$bundle" && sha256sum --strict -c SHA256SUMS)

echo "== securesystemslib $sslib_version, rfc8785 $rfc8785_version"
venv=$cache/venv
if [[ ! -x $venv/bin/python ]]; then
  python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c "import securesystemslib, sys; sys.exit(securesystemslib.__version__ != '$sslib_version')" 2>/dev/null; then
  "$venv/bin/pip" install --quiet "securesystemslib[crypto]==$sslib_version"
fi
if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('rfc8785') != '$rfc8785_version')" 2>/dev/null; then
  "$venv/bin/pip" install --quiet "rfc8785==$rfc8785_version"
fi
"$venv/bin/python" "$repo/scripts/ci/dsse_verify.py" "$bundle"

echo "== wasm32 (kvw-evidence --features wasm) in node"
wasm_bindgen=${WASM_BINDGEN:-$(command -v wasm-bindgen || echo "$HOME/.cargo/bin/wasm-bindgen")}
if ! "$wasm_bindgen" --version | grep -q ' 0\.2\.130$'; then
  echo "wasm-bindgen 0.2.130 is required (found: $("$wasm_bindgen" --version 2>&1 || true))" >&2
  exit 1
fi
(cd "$repo" && cargo rustc --quiet -p kvw-evidence --lib --release \
  --target wasm32-unknown-unknown --features wasm --crate-type cdylib)
target_dir=$(cd "$repo" && cargo metadata --format-version 1 --no-deps |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
pkg=$(mktemp -d)
trap 'rm -rf "$pkg"' EXIT
"$wasm_bindgen" --target nodejs --out-dir "$pkg" \
  "$target_dir/wasm32-unknown-unknown/release/kvw_evidence.wasm"
node "$repo/scripts/ci/wasm_verify.mjs" "$pkg" "$bundle"

echo "== interop: all checks passed"
