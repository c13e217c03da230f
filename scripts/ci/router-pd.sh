#!/usr/bin/env bash
# SGLang's own PD router (`sglang-router` from PyPI, a Rust binary) in front
# of a prefill and a decode worker, each its own `kvw serve --role` process,
# with the KV crossing between them over the prefill's bootstrap port; all on
# 127.0.0.1. `kvw audit` runs through the router for each pair of fixes:
#
#   none / none                     the leak: isolation fails, the canary quoted
#   all / all, equal pools          every gate passes (version: the router names none)
#   0.5.21 prefill / 0.5.19 decode  a rolling upgrade, prefill first: what the router returns, and when
#   0.5.19 prefill / 0.5.21 decode  decode first: the leak stays
#
# then kills each worker in the middle of a run and records what the router
# and the surviving worker answered; every request is bounded.
#
# Usage: scripts/ci/router-pd.sh KVW_BINARY [FINDINGS_DIR]
# Env:   KVW_CACHE (default ~/.cache/kvwitness) holds the router's venv;
#        KVW_ROUTER_VERSION (default 0.3.2) picks the release.
set -euo pipefail

kvw=$(realpath "$1")
findings=${2:-$(mktemp -d)}
mkdir -p "$findings"
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cache=${KVW_CACHE:-$HOME/.cache/kvwitness}
version=${KVW_ROUTER_VERSION:-0.3.2}
# shellcheck source=serve_util.sh
. "$repo/scripts/ci/serve_util.sh"

venv=$cache/venv-router
ensure_venv "$venv" "import importlib.metadata as m, sys; sys.exit(m.version('sglang-router') != '$version')" "sglang-router==$version"

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

release_0521=retire-aborted-prefill-result,retire-unadmitted-reject
keys=(--key tenant-a --key tenant-b)

# start_pair NAME PREFILL_FIXES DECODE_FIXES [DECODE_FLAG...]: the three
# processes on free ports; sets endpoint, prefill_pid, decode_pid, router_pid.
start_pair() {
  local name=$1 pf=$2 df=$3
  shift 3
  local pp dp bp rp mp
  pp=$(free_port) dp=$(free_port) bp=$(free_port) rp=$(free_port) mp=$(free_port)
  KVW_LOG=info "$kvw" serve --role prefill --addr "127.0.0.1:$pp" --bootstrap-port "$bp" \
    --fixes "$pf" "${keys[@]}" --for-seconds 300 >"$work/$name.prefill.log" 2>&1 &
  prefill_pid=$!
  pids+=("$prefill_pid")
  KVW_LOG=info "$kvw" serve --role decode --addr "127.0.0.1:$dp" --fixes "$df" "${keys[@]}" "$@" \
    --for-seconds 300 >"$work/$name.decode.log" 2>&1 &
  decode_pid=$!
  pids+=("$decode_pid")
  wait_http "http://127.0.0.1:$pp/health" 20 "$prefill_pid"
  wait_http "http://127.0.0.1:$dp/health" 20 "$decode_pid"
  # The router's metrics server must get a port of its own: it panics on
  # one already taken.
  "$venv/bin/python" -m sglang_router.launch_router --pd-disaggregation \
    --prefill "http://127.0.0.1:$pp" "$bp" --decode "http://127.0.0.1:$dp" \
    --host 127.0.0.1 --port "$rp" --prometheus-host 127.0.0.1 --prometheus-port "$mp" \
    --log-level warn >"$work/$name.router.log" 2>&1 &
  router_pid=$!
  pids+=("$router_pid")
  wait_http "http://127.0.0.1:$rp/readiness" 30 "$router_pid"
  endpoint=http://127.0.0.1:$rp
}

stop_pair() {
  kill "$prefill_pid" "$decode_pid" "$router_pid" 2>/dev/null || true
  wait "$prefill_pid" "$decode_pid" "$router_pid" 2>/dev/null || true
}

# audit NAME GATES: kvw audit through the router; one JSON line per gate in
# FINDINGS_DIR/NAME.jsonl, the signed receipts verified.
audit() {
  local name=$1 gates=$2 rc=0
  "$kvw" audit --endpoint "$endpoint" --key tenant-a --key tenant-b \
    --context-len 8192 --pool-tokens 4096 --gates "$gates" --max-seconds 240 \
    --json --out "$work/$name.receipts" >"$findings/$name.jsonl" || rc=$?
  if [[ $rc -ne 0 && $rc -ne 1 ]]; then
    echo "kvw audit ($name) stopped with an error (exit $rc)" >&2
    return 1
  fi
  "$kvw" verify "$work/$name.receipts" >/dev/null
}

# expect NAME GATE=RESULT...: each gate's result, and print every gate.
expect() {
  python3 - "$findings/$1.jsonl" "$1" "${@:2}" <<'PY'
import json, sys
path, name, wants = sys.argv[1], sys.argv[2], sys.argv[3:]
gates = {g["gate"]: g for g in map(json.loads, open(path)) if "gate" in g}
for g in gates.values():
    print(f'{name:<22} {g["gate"]:<13} {g["result"]:<12} {g["reason"]}')
for w in wants:
    gate, result = w.split("=")
    assert gates[gate]["result"] == result, (name, gate, gates[gate]["result"], gates[gate]["reason"])
PY
}

all_gates=version,capacity,admission,isolation,lifetime,status,prefix-cache

start_pair none none none
audit none "$all_gates"
stop_pair
expect none capacity=fail isolation=fail
grep -q '"gate":"isolation".*received tenant t0.s canary CANARY-t0' "$findings/none.jsonl"

# Decode's pool as large as prefill's: decode's own input check refuses the
# over-pool prompt too, so the router relays a 400 at once.
start_pair fixed all all --decode-pool-tokens 4096
audit fixed "$all_gates"
stop_pair
expect fixed version=inconclusive capacity=pass admission=pass isolation=pass \
  lifetime=pass status=pass prefix-cache=pass

# A rolling upgrade, prefill first: prefill refuses at once (400), decode
# waits for KV until its waiting timeout (500); the router relays decode's
# 500 and retries the pair.
start_pair prefill-first "$release_0521" none
audit prefill-first capacity,admission,isolation
stop_pair
expect prefill-first capacity=fail admission=fail
grep -q '"gate":"admission".*answered 500 after' "$findings/prefill-first.jsonl"

# Decode first: prefill still sends one page and answers 200; decode reads
# the pages it reserved.
start_pair decode-first none "$release_0521"
audit decode-first capacity,isolation
stop_pair
expect decode-first capacity=fail isolation=fail

# A worker killed in the middle of a run: what the client gets from the
# router, and what the surviving worker answered; nothing hangs.
for victim in decode prefill; do
  start_pair "kill-$victim" all all --decode-pool-tokens 4096
  pid_var=${victim}_pid
  "$venv/bin/python" "$repo/scripts/ci/router_client.py" run "$endpoint" 6 2 "${!pid_var}" \
    >"$findings/kill-$victim.json"
  survivor=prefill
  [[ $victim == prefill ]] && survivor=decode
  stop_pair
  # The surviving worker's own answers, from its log lines.
  grep -o 'status=[0-9]*' "$work/kill-$victim.$survivor.log" | sort | uniq -c \
    >"$findings/kill-$victim.$survivor-answers.txt" || true
  python3 - "$findings/kill-$victim.json" "$victim" "$survivor" \
    "$findings/kill-$victim.$survivor-answers.txt" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
victim, survivor = sys.argv[2], sys.argv[3]
ours = " ".join(open(sys.argv[4]).read().split())
print(f"kill {victim:<8} router's answers {r['statuses']}, longest request {r['longest_request_s']} s; {survivor} answered: {ours}")
for k, v in sorted(r["first_answers"].items()):
    print(f"  {k}: {v[:200]}")
assert r["statuses"]["before"].get("200", 0) > 0, r
# After the kill the client hears of it: some answer is not a 200.
assert any(s != "200" for s in r["statuses"]["after"]), r
assert r["longest_request_s"] < 30, r
PY
done
echo "router: every pair audited through sglang-router $version; findings in $findings"
