#!/usr/bin/env bash
# `kvw audit` against a real third-party OpenAI-compatible server: llama.cpp's
# server from the `llama-cpp-python[server]` package (PyPI), serving a tiny
# random-weight model this script writes with the `gguf` package, on
# 127.0.0.1. Checks that every gate ran and decided (pass, fail or
# inconclusive — never an audit error) and prints what it found; the
# findings are the server's, so they are reported, not asserted.
#
# Usage: scripts/ci/third-party-audit.sh KVW_BINARY [FINDINGS.jsonl]
# Env:   KVW_CACHE (default ~/.cache/kvwitness) holds the venv; the first
#        run compiles llama.cpp (about 6 minutes on 2 cores), later runs reuse it.
set -euo pipefail

kvw=$(realpath "$1")
findings=${2:-$(mktemp)}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cache=${KVW_CACHE:-$HOME/.cache/kvwitness}
# shellcheck source=serve_util.sh
. "$repo/scripts/ci/serve_util.sh"

venv=$cache/venv-llama
if [[ ! -x $venv/bin/python ]]; then
  python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c "import llama_cpp.server, gguf, numpy" 2>/dev/null; then
  echo "installing llama-cpp-python[server] and gguf (compiles llama.cpp once)"
  # The server only ever serves a tiny model: -O1 and no multimodal library
  # build in about two thirds of the time of the package's defaults (5.7
  # against 8.3 minutes on 2 cores), with the same findings.
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAVA_BUILD=OFF -DCMAKE_C_FLAGS_RELEASE=-O1 -DCMAKE_CXX_FLAGS_RELEASE=-O1" \
    CMAKE_BUILD_PARALLEL_LEVEL=${KVW_BUILD_JOBS:-$(nproc)} \
    "$venv/bin/pip" install --quiet "llama-cpp-python[server]" gguf numpy
fi

work=$(mktemp -d)
model=$work/tiny.gguf
"$venv/bin/python" "$repo/scripts/ci/tiny_gguf.py" "$model" --seed 2026
port=$(free_port)
"$venv/bin/python" -m llama_cpp.server --model "$model" --host 127.0.0.1 --port "$port" \
  --n_ctx 1024 >"$work/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true; rm -rf "$work"' EXIT
wait_http "http://127.0.0.1:$port/v1/models" 60

# llama.cpp's KV cache is its context (n_ctx), which it does not advertise.
rc=0
"$kvw" audit --endpoint "http://127.0.0.1:$port" --key tenant-a --key tenant-b \
  --context-len 1024 --pool-tokens 1024 --max-tokens 8 --pairs 24 \
  --json --out "$work/receipts" --max-seconds 240 >"$findings" || rc=$?
if [[ $rc -ne 0 && $rc -ne 1 ]]; then
  echo "kvw audit stopped with an error (exit $rc)" >&2
  exit 1
fi
python3 - "$findings" <<'PY'
import json, sys
gates = [g for g in map(json.loads, open(sys.argv[1])) if "gate" in g]
names = [g["gate"] for g in gates]
assert names == ["version", "capacity", "admission", "isolation", "lifetime", "status", "prefix-cache"], names
for g in gates:
    assert g["result"] in ("pass", "fail", "inconclusive"), g
    assert g["requests"] > 0 or g["gate"] == "capacity", g
    print(f'llama.cpp {g["gate"]:<13} {g["result"]:<12} {g["reason"]}')
PY
ls "$work/receipts"/receipts/*.receipt.json >/dev/null
"$kvw" verify "$work/receipts" >/dev/null
echo "third-party audit: every gate ran (kvw audit exit $rc)"
