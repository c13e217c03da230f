#!/usr/bin/env bash
# The one prepared GPU check of kvwitness: every CUDA kernel variant against
# the CPU reference on random inputs, then the goal-shaped decode benchmark
# (see kernels/README.md, "With a GPU").
#
#   scripts/gpu-check.sh --prepare
#       Here, on a machine with Rust and network (no GPU needed): builds
#       kvw-gpu-check (--release --features cuda) and, through
#       scripts/ci/cuda-compile-check.sh, the kernels' PTX exactly as CI
#       compiles and assembles it, into dist/kvw-gpu/ (git-ignored). Carry
#       that folder to the GPU machine with the working tree.
#
#   scripts/gpu-check.sh [--require-gpu] [kvw-gpu-check options]
#       There, from the repository root; needs neither Rust nor network.
#       Finds libcuda.so.1 (ldconfig, /usr/local/nvidia/lib64, the usual
#       system folders, KVW_LIBCUDA_DIR) and puts its folder on the library
#       path, finds NVRTC (CUDA 12 or 13; linked under a name cudarc
#       loads), restores the exec bit of the prepared binary and runs it
#       with the prepared PTX; the binary falls back to NVRTC when the PTX
#       does not load. Results go to $OUT (default dist/gpu-check-out):
#       gpu-check.log (this script), gpu-check.txt (the check's output),
#       gpu-check.json, gpu-check-table.txt, nvidia-smi.txt.
#
# --require-gpu: no driver or no device is an error (exit 4, one line on
# stderr) instead of a skipped check (exit 0, one line).
# Exit status: the check's (0 pass, 1 a check failed, 2 error, 3 no device
# with --require-gpu), 4 no driver with --require-gpu, 5 nothing to run.
# Bounded: the check itself is stopped after 170 s; without a prepared
# binary and with cargo present, an offline build gets 200 s more.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
dist="$root/dist/kvw-gpu"

if [[ "${1:-}" == "--prepare" ]]; then
  set -e
  export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
  rm -rf "$dist"
  mkdir -p "$dist/ptx"
  cargo build --release -p kvw-kernels --features cuda --bin kvw-gpu-check
  cp "$CARGO_TARGET_DIR/release/kvw-gpu-check" "$dist/kvw-gpu-check"
  strip "$dist/kvw-gpu-check" 2>/dev/null || true
  KVW_PTX_OUT="$dist/ptx" scripts/ci/cuda-compile-check.sh
  rm -f "$dist/ptx"/*.cubin "$dist/ptx/kvw-cuda-emu"
  {
    echo "commit $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (uncommitted changes)')"
    echo "prepared $(date -u +%FT%TZ)"
    (cd "$dist" && sha256sum kvw-gpu-check ptx/*)
  } >"$dist/MANIFEST"
  du -sh "$dist"
  echo "gpu-check: prepared $dist; carry dist/kvw-gpu, then run: scripts/gpu-check.sh --require-gpu"
  exit 0
fi

require=""
if [[ "${1:-}" == "--require-gpu" ]]; then
  require=1
  shift
fi

# --- The driver, before anything else: a missing one is one line.
find_libcuda() {
  local d
  for d in ${KVW_LIBCUDA_DIR:-} \
           $(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 / {print $NF}' | xargs -r -n1 dirname) \
           /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64 \
           /usr/lib /usr/local/cuda/lib64 /usr/local/cuda/compat /usr/lib/wsl/lib; do
    # The toolkit's stubs/libcuda.so only lets programs link; it has no driver.
    case "$d" in *stubs*) continue ;; esac
    if [[ -e "$d/libcuda.so.1" ]]; then
      echo "$d"
      return 0
    fi
  done
  return 1
}
if ! cuda_dir="$(find_libcuda)"; then
  msg="gpu-check: no CUDA driver: libcuda.so.1 is not in ldconfig's cache, /usr/local/nvidia/lib64, /usr/lib/x86_64-linux-gnu, /usr/local/cuda/lib64 or KVW_LIBCUDA_DIR"
  if [[ -n "$require" ]]; then
    echo "$msg" >&2
    exit 4
  fi
  echo "$msg; nothing checked (--require-gpu makes this an error)"
  exit 0
fi
export LD_LIBRARY_PATH="$cuda_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

OUT="${OUT:-$root/dist/gpu-check-out}"
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu-check.log") 2>&1
echo "gpu-check: $(date -u +%FT%TZ) on $(hostname); driver library $cuda_dir/libcuda.so.1"
[[ -f "$dist/MANIFEST" ]] && sed 's/^/gpu-check: prepared: /' "$dist/MANIFEST" | head -2

if command -v nvidia-smi >/dev/null; then
  nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1 || true
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,temperature.gpu,power.draw \
    --format=csv 2>&1 || true
else
  echo "gpu-check: nvidia-smi not found"
fi

# --- NVRTC (the fallback when the prepared PTX does not load). cudarc tries
# libnvrtc.so, libnvrtc.so.12, ...; a CUDA 13 machine may only have
# libnvrtc.so.13, so link the one found under the plain name.
nvrtc=""
for cand in ${KVW_NVRTC:-} \
            /usr/local/cuda/lib64/libnvrtc.so \
            /usr/local/cuda/lib64/libnvrtc.so.* \
            /usr/local/cuda/targets/x86_64-linux/lib/libnvrtc.so* \
            $(python3 -c 'import site,glob; [print(p) for d in site.getsitepackages() for p in sorted(glob.glob(d+"/nvidia/**/libnvrtc.so*", recursive=True))]' 2>/dev/null) \
            $(ldconfig -p 2>/dev/null | awk '/libnvrtc\.so/ {print $NF}'); do
  case "$cand" in *builtins*|*alt*) continue ;; esac
  if [[ -f "$cand" ]]; then nvrtc="$(readlink -f "$cand")"; break; fi
done
if [[ -n "$nvrtc" ]]; then
  linkdir="$(mktemp -d)"
  ln -s "$nvrtc" "$linkdir/libnvrtc.so"
  export LD_LIBRARY_PATH="$linkdir:$(dirname "$nvrtc"):$LD_LIBRARY_PATH"
  echo "gpu-check: NVRTC $nvrtc"
else
  echo "gpu-check: no libnvrtc found: only the prepared PTX can be loaded"
fi

# --- The binary: the prepared one (exec bit restored; copied if the tree
# is read-only), else a local build when cargo is there.
bin=""
if [[ -f "$dist/kvw-gpu-check" ]]; then
  bin="$dist/kvw-gpu-check"
  if ! chmod +x "$bin" 2>/dev/null || [[ ! -x "$bin" ]]; then
    cp "$bin" /tmp/kvw-gpu-check && chmod +x /tmp/kvw-gpu-check && bin=/tmp/kvw-gpu-check
  fi
elif command -v cargo >/dev/null; then
  echo "gpu-check: no prepared binary; building with $(cargo --version) (offline, 200 s at most)"
  export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
  if timeout 200 cargo build --release --offline -p kvw-kernels --features cuda --bin kvw-gpu-check -j "$(nproc)"; then
    bin="$CARGO_TARGET_DIR/release/kvw-gpu-check"
  fi
fi
if [[ -z "$bin" || ! -x "$bin" ]]; then
  echo "gpu-check: NOTHING TO RUN: no $dist/kvw-gpu-check and no local build; run 'scripts/gpu-check.sh --prepare' on a build machine and carry dist/kvw-gpu" >&2
  exit 5
fi

args=(--out "$OUT")
[[ -d "$dist/ptx" ]] && args+=(--ptx-dir "$dist/ptx")
[[ -n "$require" ]] && args+=(--require-gpu)
echo "gpu-check: running $bin ${args[*]} $*"
timeout 170 "$bin" "${args[@]}" "$@" 2>&1 | tee "$OUT/gpu-check.txt"
rc=${PIPESTATUS[0]}
if [[ $rc -eq 124 ]]; then echo "gpu-check: TIMED OUT after 170 s"; fi
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv 2>/dev/null || true
echo "gpu-check: exit $rc"
exit "$rc"
