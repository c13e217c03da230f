#!/usr/bin/env bash
# Run every test of kvwitness, installing what the tests need first.
#
#   ./scripts/test.sh
#
# Stages: format and lint, the Rust test suites (engine, evidence, kernels,
# explorer SSR), the attack set (hostile bundles, requests and arguments
# against the kvw binary; also part of `cargo test`, run on its own here so
# its counts are printed), the published bundle verified with --reproduce, receipt
# interop (sha256sum, python securesystemslib, the wasm32 verifier under
# Node), the CUDA compile check (NVRTC + ptxas from PyPI wheels), the
# explorer in headless Chromium, the site's size for the full fix matrix
# (against the 8 MB target), the official `openai` Python client against
# `kvw serve --openai`, `kvw audit` against llama.cpp's server (PyPI
# llama-cpp-python; compiled once into the cache), and the benchmarks (printed, never
# asserted). Every stage runs; the script exits non-zero if any failed.
#
# Caches go under ${KVW_CACHE:-$HOME/.cache/kvwitness}; set CARGO_TARGET_DIR
# to keep cargo's build outside the checkout.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export KVW_CACHE="${KVW_CACHE:-$HOME/.cache/kvwitness}"
target="${CARGO_TARGET_DIR:-$root/target}"
kvw="$target/release/kvw"
bundle="evidence/bundles/incident"
# Receipts signed during tests use a throwaway key, never the user's.
export KVW_KEY="${KVW_KEY:-$KVW_CACHE/test-signing-key.json}"

passed=0
failed=0
failures=()
stage() {
  local name="$1"
  shift
  echo
  echo "=== $name"
  local t0=$SECONDS
  if "$@"; then
    passed=$((passed + 1))
    echo "=== $name: ok ($((SECONDS - t0)) s)"
  else
    failed=$((failed + 1))
    failures+=("$name")
    echo "=== $name: FAILED ($((SECONDS - t0)) s)"
  fi
}

stage "toolchain" ./scripts/setup.sh
stage "cargo fmt" cargo fmt --all -- --check
stage "cargo clippy" cargo clippy --workspace --all-targets -- -D warnings
stage "cargo clippy (cuda)" cargo clippy -p kvw-kernels -p kvw-engine --all-targets --features kvw-engine/cuda -- -D warnings
stage "cargo check (evidence for wasm32)" cargo check -p kvw-evidence --target wasm32-unknown-unknown --features wasm
stage "cargo clippy (wasm hydrate)" cargo clippy -p kvw-explorer --lib --target wasm32-unknown-unknown --no-default-features --features hydrate -- -D warnings
stage "cargo test" cargo test --workspace
stage "attack set (verify, site build, serve, probe, bundle)" cargo test -p kvw --test attacks -- --nocapture --test-threads 2
stage "build kvw" cargo build --release --bin kvw
stage "published bundle: kvw verify --reproduce" "$kvw" verify "$bundle" --reproduce
stage "receipt interop" ./scripts/ci/evidence-interop.sh "$bundle"
stage "cuda compile check" ./scripts/ci/cuda-compile-check.sh
stage "explorer in chromium" ./scripts/ci/explorer.sh "$bundle"
stage "explorer size for the full fix matrix" ./scripts/ci/site-size.sh "$kvw" site/pkg
model_check() {
  # A small bound of both verdicts: pre-fix the isolation property fails
  # (exit 1) and the counterexample receipt verifies; all fixes hold.
  local dir
  dir="$(mktemp -d)"
  "$kvw" keygen --out "$dir" >/dev/null &&
    { "$kvw" check --fixes none --requests 1 --key "$dir/signing-key.json" --out "$dir/none.json"; [[ $? -eq 1 ]]; } &&
    "$kvw" check --fixes all --requests 2 --faults all --key "$dir/signing-key.json" --out "$dir/all.json" &&
    "$kvw" verify "$dir/none.json" && "$kvw" verify "$dir/all.json"
  local rc=$?
  rm -rf "$dir"
  return $rc
}
stage "model check (kvw check, small bound)" model_check
gates_and_fuzz() {
  # Every gate passes with all fixes; with none the recorded scenarios fail
  # (exit 1); a short randomized run without fixes finds a violation, shrinks
  # it, and its receipt verifies and reproduces; with all fixes none breaks.
  local dir
  dir="$(mktemp -d)"
  "$kvw" keygen --out "$dir" >/dev/null &&
    "$kvw" gates --fixes all >/dev/null &&
    { "$kvw" gates --fixes none >/dev/null; [[ $? -eq 1 ]]; } &&
    { "$kvw" fuzz --fixes none --runs 200 --key "$dir/signing-key.json" --out "$dir"; [[ $? -eq 1 ]]; } &&
    "$kvw" verify "$dir"/fuzz-fixes-none-seed-*.json --key "$dir/kvw.pub.json" --reproduce &&
    "$kvw" fuzz --fixes all --runs 200
  local rc=$?
  rm -rf "$dir"
  return $rc
}
stage "gates and randomized runs (kvw gates, kvw fuzz)" gates_and_fuzz
stage "openai python client against kvw serve --openai" ./scripts/ci/openai-interop.sh "$kvw"
stage "kvw audit against llama.cpp's server (third party)" ./scripts/ci/third-party-audit.sh "$kvw"
stage "benchmarks" "$kvw" bench --reps 2

echo
if ((failed > 0)); then
  echo "failed stages: ${failures[*]}"
fi
echo "summary: $passed passed, $failed failed"
((failed == 0))
