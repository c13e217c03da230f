#!/usr/bin/env bash
# Upstream differential in CI: set up the SGLang venvs (cached under
# ~/.cache/kvwitness/upstream), run every probe on the real releases and the
# engine twins, print the case x release table and write the signed
# receipts. Fails when the two doors for an over-long prompt or the two
# effects observed before PR #36988 (an aborted final result re-queued and
# sent; a late result of a retired request still sending a chunk) differ
# between real SGLang and the engine at any release.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
out="${1:-$root/dist/upstream-run}"
key="${KVW_KEY:-}"
cargo build --release --bin kvw -q
rm -rf "$out"
args=(upstream run --out "$out")
[[ -n "$key" ]] && args+=(--key "$key")
start=$(date +%s)
kvw="${CARGO_TARGET_DIR:-$root/target}/release/kvw"
"$kvw" "${args[@]}" --require-agree \
  test_rejected_request_is_retired_at_each_pd_door.prefill,test_rejected_request_is_retired_at_each_pd_door.decode,aborted-final-result,test_delayed_result_ignores_already_retired_request
for receipt in "$out"/upstream-*.json; do
  "$kvw" verify "$receipt" >/dev/null
done
echo "upstream-diff: $(ls "$out"/upstream-*.json | wc -l) receipts verify"
echo "upstream-diff: done in $(( $(date +%s) - start )) s"
