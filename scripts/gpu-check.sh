#!/usr/bin/env bash
# The one prepared GPU check of kvwitness: CUDA kernels against the CPU
# reference on random inputs, then decode bandwidth against a device-to-device
# copy, tags on and off (see kernels/README.md).
#
# Two modes:
#
#   scripts/gpu-check.sh --prepare
#       Run on a machine WITHOUT a GPU, before lending one: builds
#       kvw-gpu-check (--release --features cuda) and the kernels' PTX (through
#       scripts/ci/cuda-compile-check.sh) into dist/kvw-gpu/. The GPU machine
#       has no network, so a binary built here is the dependable way to get
#       there; carry dist/kvw-gpu along (it is git-ignored).
#
#   scripts/gpu-check.sh
#       Run on the GPU machine, from the repository root, with $OUT set to an
#       existing folder. If cargo is there, builds kvw-gpu-check itself
#       (offline cache or vendored sources permitting); otherwise, or if that
#       build fails, runs dist/kvw-gpu/kvw-gpu-check. Finds NVRTC (CUDA 12 or
#       13) for the run, falling back to the carried PTX. Everything goes to
#       $OUT: gpu-check.log (this script), gpu-check.txt (the check's output),
#       gpu-check.json (results), nvidia-smi.txt.
#
# Bounded: build 200 s offline (+60 s online try), check 180 s: under 8
# minutes in the worst case, about one in practice. Exit status: the check's
# (0 pass, 1 a check failed, 2 error), 3 when there was nothing to run.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
dist="$root/dist/kvw-gpu"

if [[ "${1:-}" == "--prepare" ]]; then
  set -e
  export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
  mkdir -p "$dist/ptx"
  cargo build --release -p kvw-kernels --features cuda --bin kvw-gpu-check
  cp "$CARGO_TARGET_DIR/release/kvw-gpu-check" "$dist/kvw-gpu-check"
  strip "$dist/kvw-gpu-check" 2>/dev/null || true
  KVW_PTX_OUT="$dist/ptx" scripts/ci/cuda-compile-check.sh
  rm -f "$dist/ptx"/*.cubin "$dist/ptx/kvw-cuda-emu"
  ls -la "$dist" "$dist/ptx"
  echo "gpu-check: prepared $dist (carry it: dist/kvw-gpu)"
  exit 0
fi

: "${OUT:?OUT must name an existing folder for the results}"
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu-check.log") 2>&1
echo "gpu-check: $(date -u +%FT%TZ) on $(hostname)"

if command -v nvidia-smi >/dev/null; then
  nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1 || true
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1 || true
else
  echo "gpu-check: nvidia-smi not found"
fi

# --- NVRTC: cudarc looks for libnvrtc.so, libnvrtc.so.12, ... on the loader
# path. A CUDA 13 machine may only have libnvrtc.so.13: link it under a name
# cudarc tries.
nvrtc=""
for cand in /usr/local/cuda/lib64/libnvrtc.so \
            /usr/local/cuda/lib64/libnvrtc.so.* \
            /usr/local/cuda/targets/x86_64-linux/lib/libnvrtc.so* \
            $(python3 -c 'import site,glob; [print(p) for d in site.getsitepackages() for p in glob.glob(d+"/nvidia/**/libnvrtc.so*", recursive=True)]' 2>/dev/null) \
            $(ldconfig -p 2>/dev/null | awk '/libnvrtc\.so/ {print $NF}'); do
  case "$cand" in *builtins*|*alt*) continue ;; esac
  if [[ -f "$cand" ]]; then nvrtc="$cand"; break; fi
done
if [[ -n "$nvrtc" ]]; then
  linkdir="$(mktemp -d)"
  ln -s "$nvrtc" "$linkdir/libnvrtc.so"
  export LD_LIBRARY_PATH="$linkdir:$(dirname "$nvrtc")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "gpu-check: NVRTC $nvrtc"
else
  echo "gpu-check: no libnvrtc found; the check will load PTX from $dist/ptx"
fi
if [[ -d "$dist/ptx" ]]; then export KVW_PTX_DIR="$dist/ptx"; fi

# --- The binary: build it here if cargo can, else the prepared one.
bin=""
if command -v cargo >/dev/null; then
  echo "gpu-check: $(cargo --version)"
  export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
  build=(cargo build --release -p kvw-kernels --features cuda --bin kvw-gpu-check -j "$(nproc)")
  # Offline first (the GPU machine has no network); online only as a short
  # second try, so a missing registry costs seconds, not minutes.
  if timeout 200 "${build[@]}" --offline; then
    bin="$CARGO_TARGET_DIR/release/kvw-gpu-check"
  elif CARGO_NET_RETRY=0 CARGO_HTTP_TIMEOUT=10 timeout 60 "${build[@]}"; then
    bin="$CARGO_TARGET_DIR/release/kvw-gpu-check"
  else
    echo "gpu-check: cargo build failed (no network here: dependencies must be cached or vendored)"
  fi
else
  echo "gpu-check: cargo not found: Rust is not installed on this machine"
fi
if [[ -z "$bin" ]]; then
  if [[ -x "${KVW_GPU_CHECK_BIN:-$dist/kvw-gpu-check}" ]]; then
    bin="${KVW_GPU_CHECK_BIN:-$dist/kvw-gpu-check}"
    echo "gpu-check: using the prepared binary $bin"
  else
    echo "gpu-check: NOTHING TO RUN: no cargo build and no prepared binary at $dist/kvw-gpu-check"
    echo "gpu-check: run 'scripts/gpu-check.sh --prepare' on a build machine and carry dist/kvw-gpu"
    exit 3
  fi
fi

echo "gpu-check: running $bin ${KVW_GPU_CHECK_ARGS:-}"
# shellcheck disable=SC2086
timeout 180 "$bin" ${KVW_GPU_CHECK_ARGS:-} 2>&1 | tee "$OUT/gpu-check.txt"
rc=${PIPESTATUS[0]}
if [[ $rc -eq 124 ]]; then echo "gpu-check: TIMED OUT after 180 s"; fi
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv 2>/dev/null || true
echo "gpu-check: exit $rc"
exit "$rc"
