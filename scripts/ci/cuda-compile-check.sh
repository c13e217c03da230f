#!/usr/bin/env bash
# Compile-check every CUDA kernel of kvwitness without a GPU.
#
# NVRTC and ptxas come from NVIDIA's PyPI wheels (no CUDA toolkit, no driver):
#   nvidia-cuda-nvrtc-cu12==12.4.127    libnvrtc.so.12 + builtins (runtime compiler)
#   nvidia-cuda-nvcc-cu12==12.4.131     ptxas (PTX -> SASS assembler)
#   nvidia-cuda-runtime-cu12==12.4.127  CUDA headers shipped beside the runtime
#   nvidia-cuda-nvdisasm==13.5.37       nvdisasm (SASS of the assembled kernels)
# They go into a venv under ${KVW_CACHE:-$HOME/.cache/kvwitness}/cuda-venv, reused
# across runs. Each kernels/cuda/*.cu is compiled to PTX for compute_90 by the
# same NVRTC call path the GPU launchers use (`kvw-nvrtc`, cudarc with dynamic
# loading), then assembled with `ptxas -arch=sm_90 -v -warn-spills -Werror`, so a
# register spill fails the check. The register/spill lines are printed.
# Every kernel variant is listed with its registers (the scalar reference
# kernels paged_decode_split_g*, the tensor-core paged_decode_mma_g8), and
# the SASS is read back: no kernel may touch local memory (LDL/STL), and the
# tensor-core kernel must hold its 32 HMMA.16816.F32.BF16, its ldmatrix
# (LDSM) and its cp.async (LDGSTS) instructions.
# Then the kernels are compiled with g++ against a small CUDA emulator
# (kernels/cuda/emulator/) and run on the CPU against plain references, once
# with cp.async copies landing at their wait and once at their issue (needs
# g++; about a minute; KVW_CUDA_EMULATE=0 skips it). Last, on a machine
# without a GPU, `scripts/gpu-check.sh --require-gpu` and
# `kvw-gpu-check --require-gpu` must both fail with one clear line.
#
# Usage (from the repository root):  scripts/ci/cuda-compile-check.sh
# Env: KVW_CACHE (cache root), CARGO_TARGET_DIR (as usual), KVW_PTX_OUT (keep the
# PTX files there; default: a temporary folder), KVW_CUDA_EMULATE=0 (skip the
# emulated run), PYTHON (interpreter for the venv, default python3).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"

cache="${KVW_CACHE:-$HOME/.cache/kvwitness}"
venv="$cache/cuda-venv"
py="${PYTHON:-python3}"

if [[ ! -x "$venv/bin/python" ]]; then
  echo "cuda-compile-check: creating venv $venv"
  mkdir -p "$cache"
  "$py" -m venv "$venv"
fi
# pip is a no-op when the pinned versions are already installed.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  nvidia-cuda-nvrtc-cu12==12.4.127 \
  nvidia-cuda-nvcc-cu12==12.4.131 \
  nvidia-cuda-runtime-cu12==12.4.127 \
  nvidia-cuda-nvdisasm==13.5.37

site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
nv="$site/nvidia"
nvrtc_lib="$nv/cuda_nvrtc/lib"
nvcc_root="$nv/cuda_nvcc"
rt_lib="$nv/cuda_runtime/lib"
ptxas="$nvcc_root/bin/ptxas"
nvdisasm="$(find "$nv" -path '*/bin/nvdisasm' -type f | head -1)"

for f in "$nvrtc_lib/libnvrtc.so.12" "$ptxas" "$nvdisasm"; do
  [[ -e "$f" ]] || { echo "cuda-compile-check: missing $f after pip install" >&2; exit 1; }
done
chmod +x "$ptxas" "$nvdisasm" 2>/dev/null || true
# cudarc also tries the unversioned name first; give it one inside the venv.
[[ -e "$nvrtc_lib/libnvrtc.so" ]] || ln -s libnvrtc.so.12 "$nvrtc_lib/libnvrtc.so"

# cargo's [env] does not reach the dynamic loader: export it here.
export LD_LIBRARY_PATH="$nvrtc_lib:$rt_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

echo "cuda-compile-check: $("$ptxas" --version | tail -1)"
cargo build --quiet -p kvw-kernels --features cuda --bin kvw-nvrtc --bin kvw-gpu-check
nvrtc_bin="${CARGO_TARGET_DIR:-$root/target}/debug/kvw-nvrtc"
check_bin="${CARGO_TARGET_DIR:-$root/target}/debug/kvw-gpu-check"

if [[ -n "${KVW_PTX_OUT:-}" ]]; then
  ptx_dir="$KVW_PTX_OUT"
  mkdir -p "$ptx_dir"
else
  ptx_dir="$(mktemp -d)"
  trap 'rm -rf "$ptx_dir"' EXIT
fi

"$nvrtc_bin" --arch compute_90 --out-dir "$ptx_dir" kernels/cuda/*.cu

status=0
for ptx in "$ptx_dir"/*.ptx; do
  name="$(basename "$ptx" .ptx)"
  echo "== $name (ptxas -arch=sm_90)"
  if ! log="$("$ptxas" -arch=sm_90 -v -warn-spills -Werror -o "$ptx_dir/$name.cubin" "$ptx" 2>&1)"; then
    echo "$log"
    echo "cuda-compile-check: ptxas FAILED for $name" >&2
    status=1
    continue
  fi
  # Keep the per-function resource lines: name, registers, spills, shared memory.
  echo "$log" | grep -E "Compiling entry function|registers|spill" | sed 's/^ptxas info *: */  /'
  # One line per kernel: name, registers, spill bytes, shared memory.
  echo "$log" | awk '
    /Compiling entry function/ { name = $0; sub(/.*function \047/, "", name); sub(/\047.*/, "", name) }
    /bytes spill stores/ { split($0, a, ","); stores = a[2]; sub(/^ */, "", stores) }
    /Used [0-9]+ registers/ { match($0, /Used [0-9]+ registers/); regs = substr($0, RSTART + 5, RLENGTH - 15);
      smem = "0 bytes smem"; if (match($0, /[0-9]+ bytes smem/)) smem = substr($0, RSTART, RLENGTH);
      printf "%s\t%s registers\t%s\t%s\n", name, regs, stores, smem }' >>"$ptx_dir/registers.tsv"
done
# The machine code says what the resource lines cannot: which instructions
# the tensor-core kernel really got, and that nothing went to local memory.
echo "== SASS (nvdisasm)"
for cubin in "$ptx_dir"/*.cubin; do
  name="$(basename "$cubin" .cubin)"
  sass="$("$nvdisasm" -c "$cubin" 2>/dev/null)" || { echo "cuda-compile-check: nvdisasm FAILED for $name" >&2; status=1; continue; }
  count() { grep -cE "$1" <<<"$sass" || true; }
  local_ops="$(count '\b(LDL|STL)\b')"
  line="  $name: $(count '\bHMMA\.16816\.F32\.BF16\b') HMMA.16816.F32.BF16, $(count '\bLDSM\b') LDSM, $(count '\bLDGSTS\b') LDGSTS, $local_ops LDL/STL"
  echo "$line"
  if [[ "$local_ops" != 0 ]]; then
    echo "cuda-compile-check: $name uses local memory" >&2
    status=1
  fi
  if [[ "$name" == paged_decode_mma ]] &&
     { [[ "$(count '\bHMMA\.16816\.F32\.BF16\b')" -lt 32 ]] || [[ "$(count '\bLDSM\b')" -lt 16 ]] || [[ "$(count '\bLDGSTS\b')" -lt 1 ]]; }; then
    echo "cuda-compile-check: paged_decode_mma lacks its tensor-core, ldmatrix or cp.async instructions" >&2
    status=1
  fi
done

if [[ -s "$ptx_dir/registers.tsv" ]]; then
  echo "== registers per kernel (sm_90)"
  column -t -s $'\t' "$ptx_dir/registers.tsv" 2>/dev/null | sed 's/^/  /' || sed 's/^/  /' "$ptx_dir/registers.tsv"
fi

# Run the kernels on the CPU through the emulator (kernels/cuda/emulator/)
# against plain references: the only execution of the CUDA code without a GPU.
if [[ "${KVW_CUDA_EMULATE:-1}" != 0 ]]; then
  if command -v g++ >/dev/null; then
    echo "== emulator (g++, kernels run on the CPU)"
    emu="$ptx_dir/kvw-cuda-emu"
    inc=(-x c++ -include emu.h)
    if g++ -std=c++17 -O2 -Wall -Wno-unknown-pragmas -I kernels/cuda/emulator -o "$emu" \
         kernels/cuda/emulator/check.cpp \
         "${inc[@]}" kernels/cuda/paged_decode_attention.cu \
         "${inc[@]}" kernels/cuda/paged_decode_mma.cu \
         "${inc[@]}" kernels/cuda/page_checksum.cu \
         "${inc[@]}" kernels/cuda/page_scrub.cu \
         "${inc[@]}" kernels/cuda/bandwidth_probe.cu; then
      # Every case with copies landing at their wait; the tensor-core cases
      # (the only cp.async user) once more with copies landing at issue.
      for mode in wait issue; do
        echo "  -- cp.async copies land at their $mode"
        only=""; [[ $mode == issue ]] && only=mma
        KVW_EMU_CP_ASYNC=$mode KVW_EMU_ONLY=$only "$emu" | sed 's/^/  /' ||
          { echo "cuda-compile-check: emulated kernels FAILED (cp.async at $mode)" >&2; status=1; }
      done
    else
      echo "cuda-compile-check: emulator build FAILED" >&2
      status=1
    fi
  else
    echo "cuda-compile-check: g++ not found, emulated run skipped"
  fi
fi

# Without a GPU, asking for one must fail loudly: one line, non-zero exit.
if ! command -v nvidia-smi >/dev/null && ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1' &&
   [[ ! -e /usr/local/nvidia/lib64/libcuda.so.1 && ! -e /usr/lib/x86_64-linux-gnu/libcuda.so.1 ]]; then
  echo "== --require-gpu on a machine without a GPU"
  require_out="$(mktemp -d)"
  for cmd in "OUT=$require_out scripts/gpu-check.sh --require-gpu" "$check_bin --require-gpu"; do
    set +e
    msg="$(env -u LD_LIBRARY_PATH bash -c "$cmd" 2>&1)"
    rc=$?
    set -e
    lines="$(printf '%s\n' "$msg" | grep -c . || true)"
    if [[ $rc -ne 0 && $lines -eq 1 ]]; then
      echo "  ok (exit $rc): $msg"
    else
      echo "cuda-compile-check: '$cmd' gave exit $rc and $lines output lines: $msg" >&2
      status=1
    fi
  done
  rm -rf "$require_out"
fi

if [[ $status -ne 0 ]]; then
  echo "cuda-compile-check: FAILED"
  exit 1
fi
echo "cuda-compile-check: OK ($(ls "$ptx_dir"/*.ptx | wc -l) source files compiled, assembled for sm_90 without spills)"
