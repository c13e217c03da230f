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
#
# A second run reuses what is up to date and says so: the model check and
# bundle when the kvw build and the signing key are the same as last time
# and dist/bundle still verifies, the browser build when the explorer's
# sources are unchanged, the site when both are. `--fresh` redoes it all.
# The bundle's and the site's inputs are recorded as a digest in
# dist/*.stamp; scripts/build-wasm.sh keeps the browser build's.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export KVW_CACHE="${KVW_CACHE:-$HOME/.cache/kvwitness}"
target="${CARGO_TARGET_DIR:-$root/target}"
kvw="$target/release/kvw"
port=8000
fresh=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --port) [[ -n "${2:-}" ]] || { echo "run: --port needs a number" >&2; exit 2; }; port="$2"; shift 2 ;;
    --fresh) fresh=1; shift ;;
    *) echo "run: unknown argument '$1' (known: --port N, --fresh)" >&2; exit 2 ;;
  esac
done

./scripts/setup.sh
cargo build --release --bin kvw
mkdir -p dist

# digest_of FILE...: one SHA-256 over the files' contents (missing files
# count as empty), for the stamps below.
digest_of() {
  local f
  for f in "$@"; do
    if [[ -f "$f" ]]; then sha256sum "$f"; else echo "missing $f"; fi
  done | sha256sum | cut -c1-64
}
# up_to_date NAME DIGEST: whether dist/NAME.stamp holds DIGEST (never with --fresh).
up_to_date() {
  [[ $fresh -eq 0 && -f "dist/$1.stamp" && "$(cat "dist/$1.stamp")" == "$2" ]]
}
signing_key="${KVW_KEY:-$HOME/.config/kvwitness/signing-key.json}"

echo
echo "== the incident, step by step (walkthrough scale)"
"$kvw" probe incident

bundle_inputs="$(digest_of "$kvw" "$signing_key")"
if up_to_date bundle "$bundle_inputs" && [[ -d dist/bundle ]] && "$kvw" verify dist/bundle >/dev/null 2>&1; then
  echo
  echo "== the model check, the fix matrix and the gates: dist/bundle is up to date (same kvw build and key) and verifies; reused"
else
  rm -f dist/bundle.stamp
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
  # The key exists now (made on first use): record the digest with it.
  digest_of "$kvw" "$signing_key" >dist/bundle.stamp
  bundle_inputs="$(cat dist/bundle.stamp)"
fi

# The browser build: scripts/build-wasm.sh copies its last build when the
# inputs are the same, and says so.
echo
echo "== the explorer"
KVW_WASM_FRESH=$fresh ./scripts/build-wasm.sh dist/pkg
mapfile -t wasm_outputs < <(find dist/pkg -type f | sort)
wasm_inputs="$(digest_of "${wasm_outputs[@]}")"
site_inputs="$(echo "$bundle_inputs $wasm_inputs $(git ls-files site | sort | xargs sha256sum | sha256sum)" | sha256sum | cut -c1-64)"
if up_to_date site "$site_inputs" && [[ -f dist/site/index.html ]]; then
  echo "== the site in dist/site is up to date (same bundle, browser build and site sources); reused"
else
  rm -f dist/site.stamp
  "$kvw" site build --bundle dist/bundle --out dist/site --wasm dist/pkg
  echo "$site_inputs" >dist/site.stamp
fi

echo
exec "$kvw" serve --dir dist/site --addr "127.0.0.1:$port"
