#!/usr/bin/env bash
# The official Python `openai` client (PyPI) against `kvw serve --openai`:
# completions, chat completions, streaming, usage, cached tokens, and the
# SDK's typed errors for a wrong key and an unknown model.
#
# Usage: scripts/ci/openai-interop.sh KVW_BINARY
# Env:   KVW_CACHE (default ~/.cache/kvwitness) holds the venv.
set -euo pipefail

kvw=$(realpath "$1")
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cache=${KVW_CACHE:-$HOME/.cache/kvwitness}
openai_version=${KVW_OPENAI_VERSION:-}
# shellcheck source=serve_util.sh
. "$repo/scripts/ci/serve_util.sh"

venv=$cache/venv-openai
ensure_venv "$venv" "import openai" "openai${openai_version:+==$openai_version}"

port=$(free_port)
"$kvw" serve --openai --addr "127.0.0.1:$port" --for-seconds 120 \
  --key interop-a --key interop-b --fixes all --prefix-cache per-tenant >/dev/null &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
KVW_WAIT_KEY=interop-a wait_http "http://127.0.0.1:$port/healthz" 20
"$venv/bin/python" "$repo/scripts/ci/openai_client_check.py" "http://127.0.0.1:$port/v1"
