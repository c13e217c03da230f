#!/usr/bin/env bash
# Upstream differential in CI: set up the SGLang venvs (installed on first
# use from PyPI with uv, cached under ${KVW_CACHE:-~/.cache/kvwitness}), run
# every probe on the real releases and the engine twins, print the case x
# release table and write the signed receipts, then verify each one.
# Fails when any case errors at any release, or any field differs between
# real SGLang and the engine with no reason given for it.
#
# Usage: scripts/ci/upstream-diff.sh [OUT]   (default: dist/upstream-run)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
out="${1:-$root/dist/upstream-run}"
start=$(date +%s)
cargo build --release --bin kvw -q
rm -rf "$out"
mkdir -p "$(dirname "$out")"
# Receipts are signed with the default key: $KVW_KEY (test.sh names a
# throwaway one), created on first use.
args=(upstream run --out "$out" --require-agree all)
kvw="${CARGO_TARGET_DIR:-$root/target}/release/kvw"
"$kvw" "${args[@]}"
for receipt in "$out"/upstream-*.json; do
  "$kvw" verify "$receipt" >/dev/null
done
echo "upstream-diff: $(ls "$out"/upstream-*.json | wc -l) receipts verify"
echo "upstream-diff: done in $(($(date +%s) - start)) s"
