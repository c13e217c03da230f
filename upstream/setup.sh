#!/usr/bin/env bash
# Install SGLang releases into one cached venv each, for the upstream
# differential (`kvw upstream run`). Each release gets `sglang==X --no-deps`
# plus only the packages its PD scheduler modules import, held to the
# versions the wheel itself pins (a constraints file made from its
# Requires-Dist). torch comes from PyPI's default index: it brings CUDA
# libraries and runs on CPU. Venvs share files through the uv cache.
#
# Usage: upstream/setup.sh [RELEASE ...]   (default: 0.5.19 0.5.20 0.5.21 0.5.23)
# A venv is built under a temporary name and renamed when its imports work,
# so a failed install leaves nothing half-written. Re-running skips ready
# venvs. Exit status is non-zero when any release fails; the failing release
# is named on one line on stderr.
set -euo pipefail

cache="${KVW_CACHE:-$HOME/.cache/kvwitness}"
base="${KVW_UPSTREAM_HOME:-$cache/upstream}"
# One uv cache beside the venvs (same file system), so the releases share
# every download and uv hard-links the files into each venv.
export UV_CACHE_DIR="${UV_CACHE_DIR:-$cache/uv}"
python="${KVW_UPSTREAM_PYTHON:-python3.11}"
known="0.5.19 0.5.20 0.5.21 0.5.23"
releases=("$@")
[[ ${#releases[@]} -eq 0 ]] && read -r -a releases <<<"$known"

# The packages the probed modules import (schedule_batch, disaggregation
# prefill/decode/utils, tp_worker), found by importing them in a bare venv.
imports=(torch numpy typing_extensions orjson pybase64 requests pillow starlette
  torchvision aiohttp msgspec pyzmq compressed-tensors gguf openai partial_json_parser
  xgrammar sentencepiece einops setproctitle uvicorn fastapi transformers datasets dill
  IPython soundfile psutil)
modules="sglang.srt.managers.schedule_batch sglang.srt.disaggregation.prefill sglang.srt.disaggregation.decode sglang.srt.disaggregation.utils sglang.srt.managers.tp_worker"

for r in "${releases[@]}"; do
  if [[ " $known " != *" $r "* ]]; then
    echo "upstream setup: unknown release sglang $r (known: $known)" >&2
    exit 2
  fi
done

mkdir -p "$base"
uv="$base/bootstrap/bin/uv"
# The bootstrap venv (pip and uv) is made only when a release needs installing.
bootstrap() {
  [[ -x "$uv" ]] && return 0
  echo "upstream setup: bootstrap venv with uv"
  rm -rf "$base/bootstrap.tmp"
  "$python" -m venv "$base/bootstrap.tmp" &&
    "$base/bootstrap.tmp/bin/python" -m pip install -q 'uv>=0.5,<1' &&
    mv "$base/bootstrap.tmp" "$base/bootstrap"
}

failed=0
for r in "${releases[@]}"; do
  venv="$base/sglang-$r"
  if [[ -f "$venv/.kvw-ready" ]]; then
    echo "upstream setup: sglang $r ready ($venv)"
    continue
  fi
  if ! bootstrap; then
    echo "upstream setup: sglang $r: cannot make the bootstrap venv (python ${python}, pip install uv)" >&2
    exit 1
  fi
  tmp="$venv.tmp"
  log="$base/sglang-$r.install.log"
  rm -rf "$tmp"
  echo "upstream setup: sglang $r: installing into $venv (log $log)"
  # The install runs in a subshell of its own with `set -e` in force (not
  # under `if`, where bash would ignore it), so its first failing step ends it.
  set +e
  (
    set -e
    "$uv" venv -q --python "$python" "$tmp"
    wheel_dir="$tmp/wheel"
    mkdir -p "$wheel_dir"
    echo "  fetching the sglang $r wheel"
    "$base/bootstrap/bin/python" -m pip download -q --no-deps --only-binary :all: -d "$wheel_dir" "sglang==$r"
    whl=$(ls "$wheel_dir"/sglang-"$r"-*.whl)
    [[ -f "$whl" ]]
    # The wheel's own pins, as constraints (extras and markers dropped).
    "$base/bootstrap/bin/python" - "$whl" >"$tmp/constraints.txt" <<'PY'
import sys, zipfile, re
with zipfile.ZipFile(sys.argv[1]) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    for line in z.read(meta).decode().splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        spec = line.split(":", 1)[1].strip()
        if ";" in spec:
            continue
        name = re.match(r"[A-Za-z0-9_.\-]+", spec).group(0)
        rest = spec[len(name):].strip()
        if rest.startswith("["):
            rest = rest[rest.index("]") + 1:].strip()
        if rest:
            print(name + rest)
PY
    echo "  installing sglang $r --no-deps and ${#imports[@]} imported packages (torch $(grep -E '^torch==' "$tmp/constraints.txt" | cut -d= -f3))"
    "$uv" pip install --python "$tmp/bin/python" --no-deps "$whl"
    "$uv" pip install --python "$tmp/bin/python" -c "$tmp/constraints.txt" "${imports[@]}"
    echo "  checking imports"
    "$tmp/bin/python" -W ignore -c "import importlib; [importlib.import_module(m) for m in '$modules'.split()]"
    sha=$(sha256sum "$whl" | cut -d' ' -f1)
    torch_v=$("$tmp/bin/python" -c "import torch; print(torch.__version__)")
    py_v=$("$tmp/bin/python" -c "import platform; print(platform.python_version())")
    printf '{"release":"%s","wheel":"%s","wheel_sha256":"%s","python":"%s","torch":"%s"}\n' \
      "$r" "$(basename "$whl")" "$sha" "$py_v" "$torch_v" >"$tmp/.kvw-ready"
  ) >"$log" 2>&1
  rc=$?
  set -e
  if ((rc != 0)); then
    echo "upstream setup: sglang $r: install failed: $(grep -E 'error|Error' "$log" | tail -1) (log $log)" >&2
    rm -rf "$tmp"
    failed=1
    continue
  fi
  # The probes run "$venv/bin/python" (a link to the base interpreter), so
  # the rename needs only the activation scripts' paths fixed.
  rm -rf "$venv"
  mv "$tmp" "$venv"
  sed -i "s#$tmp#$venv#g" "$venv/pyvenv.cfg" "$venv"/bin/activate* 2>/dev/null || true
  echo "upstream setup: sglang $r ready: $(cat "$venv/.kvw-ready")"
done
exit $failed
