#!/usr/bin/env bash
# CI job for the explorer: build the browser bundle, build a site from a
# bundle, and run the end-to-end tests in headless Chromium.
#
#   scripts/ci/explorer.sh [BUNDLE_DIR]
#
# BUNDLE_DIR defaults to the published bundle (evidence/bundles/incident,
# re-verified by the Rust tests); pass the output of `kvw bundle` to test
# another. Installs what is missing: the wasm32 target,
# wasm-bindgen-cli 0.2.130, binaryen (npm, into the cache), Chromium (apt),
# and the test's npm packages (playwright-core, axe-core). Cache: ${KVW_CACHE:-$HOME/.cache/kvwitness}.
# A second, small site is built from the `results_bundle` example (sample
# probes, a model check's counterexample, a shrunk randomized run) to reach
# the page kinds the published bundle lacks.
# The explorer's Rust tests (unit and static rendering) run with the other
# Rust suites (`scripts/test.sh rust`), not here.
# Outputs: site in ${KVW_SITE_OUT:-target/explorer-site} (the results site
# beside it, ${KVW_RESULTS_OUT:-target/explorer-site-results}), screenshots in
# ${KVW_SHOTS_DIR:-target/explorer-screenshots}.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
BUNDLE=$(realpath "${1:-evidence/bundles/incident}")
export KVW_CACHE=${KVW_CACHE:-$HOME/.cache/kvwitness}
SITE_OUT=$(realpath -m "${KVW_SITE_OUT:-target/explorer-site}")
export KVW_SHOTS_DIR=$(realpath -m "${KVW_SHOTS_DIR:-target/explorer-screenshots}")
WASM_BINDGEN_VERSION=0.2.130

step() { printf '\n== %s\n' "$*"; }

step "toolchain"
rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
if [ "$(wasm-bindgen --version 2>/dev/null | awk '{print $2}')" != "$WASM_BINDGEN_VERSION" ]; then
    cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION"
fi
if [ ! -x /usr/bin/chromium ]; then
    SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
    $SUDO apt-get update
    $SUDO apt-get install -y chromium chromium-driver
fi
command -v node >/dev/null || { echo "node (>= 20) is required" >&2; exit 1; }

step "browser build (wasm)"
scripts/build-wasm.sh "$ROOT/site/pkg"

step "site from $BUNDLE (kvw site build)"
cargo build -q --release --bin kvw
KVW_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/kvw"
export KVW_BIN
rm -rf "$SITE_OUT"
"$KVW_BIN" site build --bundle "$BUNDLE" --out "$SITE_OUT" --wasm "$ROOT/site/pkg"

step "site from the results_bundle example"
# Built as the workspace's tests build it (`cargo test --workspace` in the
# rust stage), so that stage's build serves here: `cargo run -p kvw-explorer`
# would resolve the crates' features for that package alone and build the
# whole tree a second time.
RESULTS=$(realpath -m "${KVW_RESULTS_OUT:-${SITE_OUT}-results}")
rm -rf "$RESULTS"
mkdir -p "$RESULTS"
cargo build -q --workspace --example results_bundle
"${CARGO_TARGET_DIR:-$ROOT/target}/debug/examples/results_bundle" "$RESULTS/bundle"
"$KVW_BIN" site build --bundle "$RESULTS/bundle" --out "$RESULTS/site"

step "browser tests"
(cd tests/browser && npm ci --no-audit --no-fund)
(cd tests/browser && KVW_SITE_DIR="$SITE_OUT" KVW_RESULTS_SITE_DIR="$RESULTS/site" node --test --test-concurrency=1)
echo "screenshots in $KVW_SHOTS_DIR"
