#!/usr/bin/env bash
# The main job of kvwitness, from a fresh clone:
#
#   ./scripts/run.sh [--port N]
#
# 1. installs what is missing (scripts/setup.sh) and builds `kvw`;
# 2. replays the incident in the terminal (`kvw probe incident`);
# 3. model-checks the handoff with no fix (the counterexample receipt), runs
#    the whole fix matrix at both scales and the four acceptance gates with
#    and without fixes, and writes it all as a signed bundle to dist/bundle
#    (key: ~/.config/kvwitness/signing-key.json, made on first use), then
#    verifies it;
# 4. builds the explorer (static HTML + hydrate WASM) into dist/site;
# 5. serves it on 127.0.0.1 and prints the URL (Ctrl-C stops it).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export KVW_CACHE="${KVW_CACHE:-$HOME/.cache/kvwitness}"
target="${CARGO_TARGET_DIR:-$root/target}"
kvw="$target/release/kvw"
port=8000
if [[ "${1:-}" == "--port" && -n "${2:-}" ]]; then port="$2"; fi

./scripts/setup.sh
cargo build --release --bin kvw

echo
echo "== the incident, step by step (walkthrough scale)"
"$kvw" probe incident

echo
echo "== the model check: the shortest path to the leak, with no fix (exit 1 expected)"
mkdir -p dist/model-check
rc=0
"$kvw" check --fixes none --requests 1 --force --out dist/model-check/model-check-fixes-none.json || rc=$?
if [[ $rc -ne 1 ]]; then
  echo "run: kvw check --fixes none was expected to find the counterexample (exit 1), got exit $rc" >&2
  exit 1
fi

echo
echo "== the fix matrix and the acceptance gates, signed"
"$kvw" bundle --out dist/bundle --model-check dist/model-check/model-check-fixes-none.json
"$kvw" verify dist/bundle

echo
echo "== the explorer"
./scripts/build-wasm.sh dist/pkg
"$kvw" site build --bundle dist/bundle --out dist/site --wasm dist/pkg

echo
exec "$kvw" serve --dir dist/site --addr "127.0.0.1:$port"
