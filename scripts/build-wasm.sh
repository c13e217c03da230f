#!/usr/bin/env bash
# Build the explorer's browser side: the `hydrate` feature compiled to
# wasm32 once per language (English in OUT_DIR, Italian in OUT_DIR/it),
# bound with wasm-bindgen (--target web) and shrunk with wasm-opt.
#
#   scripts/build-wasm.sh [OUT_DIR]        (default: site/pkg)
#
# wasm-opt comes from the npm package `binaryen`, installed once into
# ${KVW_CACHE:-$HOME/.cache/kvwitness}/binaryen; Debian's binaryen is too old
# and produces broken modules. Prints the gzipped size of each final .wasm
# and how it stands against the 250 KB (256000 bytes) gzipped target.
#
# The two languages' builds differ only in features of the same crate, so
# cargo rebuilds the crate (about 40 s with LTO) for each, every time. A
# build is therefore kept in ${KVW_CACHE}/wasm-pkg under the digest of its
# inputs (the files of the crates it compiles and of site/, which they
# include, tracked or not; the lock file and workspace manifest; this
# script; rustc, wasm-bindgen and binaryen versions) and copied from there
# when they are the same, which the script says; KVW_WASM_FRESH=1 builds
# anyway.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${1:-$ROOT/site/pkg}
CACHE=${KVW_CACHE:-$HOME/.cache/kvwitness}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
BINARYEN_VERSION=${BINARYEN_VERSION:-132.0.0}
WASM_BINDGEN_VERSION=0.2.130

command -v wasm-bindgen >/dev/null || { echo "wasm-bindgen missing: cargo install wasm-bindgen-cli --version $WASM_BINDGEN_VERSION" >&2; exit 1; }
have=$(wasm-bindgen --version | awk '{print $2}')
[ "$have" = "$WASM_BINDGEN_VERSION" ] || { echo "wasm-bindgen $have found, $WASM_BINDGEN_VERSION needed (it must match the crate)" >&2; exit 1; }

# Size matters more than build speed for this one artefact.
export CARGO_PROFILE_RELEASE_OPT_LEVEL=z
export CARGO_PROFILE_RELEASE_LTO=true
export CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1
export CARGO_PROFILE_RELEASE_DEBUG=0
export CARGO_PROFILE_RELEASE_PANIC=abort

WASM_OPT="$CACHE/binaryen/node_modules/.bin/wasm-opt"
if [ ! -x "$WASM_OPT" ]; then
    mkdir -p "$CACHE/binaryen"
    npm install --prefix "$CACHE/binaryen" --no-audit --no-fund --loglevel=error "binaryen@$BINARYEN_VERSION" >&2
fi

TARGET_GZ=256000
# One build per language (feature only-LANG): a page loads the build of its
# own language, which carries that language's strings only. English goes to
# OUT (the default), Italian to OUT/it, with the same file names.
build() {
    local lang=$1 dir=$2
    # The crate is an rlib for its native users (the engine); only this
    # build asks for a cdylib, so native builds never link a shared library.
    (cd "$ROOT" && cargo rustc -p kvw-explorer --lib --target wasm32-unknown-unknown --release \
        --no-default-features --features "hydrate only-$lang" --crate-type cdylib)
    mkdir -p "$dir"
    wasm-bindgen --target web --no-typescript --out-dir "$dir" --out-name kvw_explorer \
        "$TARGET_DIR/wasm32-unknown-unknown/release/kvw_explorer.wasm"
    # -Oz, then flatten and re-loop the control flow and shrink again: about
    # 1% smaller than -Oz alone (measured; -Os, --converge and a second -Oz
    # alone gain nothing).
    "$WASM_OPT" -Oz --flatten --rereloop -Oz -Oz --strip-debug --strip-producers \
        --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
        --enable-reference-types --enable-multivalue --enable-mutable-globals \
        -o "$dir/kvw_explorer_bg.wasm.opt" "$dir/kvw_explorer_bg.wasm"
    mv "$dir/kvw_explorer_bg.wasm.opt" "$dir/kvw_explorer_bg.wasm"

    local raw gz js
    raw=$(wc -c <"$dir/kvw_explorer_bg.wasm")
    gz=$(gzip -9 -c "$dir/kvw_explorer_bg.wasm" | wc -c)
    js=$(gzip -9 -c "$dir/kvw_explorer.js" | wc -c)
    echo "wasm ($lang): $dir/kvw_explorer_bg.wasm $raw bytes, $gz bytes gzipped ($((gz / 1024)) KiB); js glue $js bytes gzipped"
    if [ "$gz" -le "$TARGET_GZ" ]; then
        echo "wasm size ($lang): $gz bytes gzipped, target 250 KB ($TARGET_GZ bytes): met, $((TARGET_GZ - gz)) bytes to spare"
    else
        echo "wasm size ($lang): $gz bytes gzipped, target 250 KB ($TARGET_GZ bytes): not met, $((gz - TARGET_GZ)) bytes over"
    fi
}

# inputs_digest: the digest the cache keys a build by, or nothing outside
# a git checkout (then every build is fresh).
inputs_digest() {
    local files
    files=$(cd "$ROOT" && git ls-files --cached --others --exclude-standard -- \
        Cargo.toml Cargo.lock explorer words evidence site scripts/build-wasm.sh 2>/dev/null) || return 0
    [ -n "$files" ] || return 0
    {
        (cd "$ROOT" && printf '%s\n' "$files" | sort -u | while read -r f; do
            if [ -f "$f" ]; then sha256sum "$f"; else echo "gone $f"; fi
        done)
        rustc -V
        echo "RUSTFLAGS=${RUSTFLAGS:-} CARGO_ENCODED_RUSTFLAGS=${CARGO_ENCODED_RUSTFLAGS:-}"
        echo "wasm-bindgen $WASM_BINDGEN_VERSION binaryen $BINARYEN_VERSION"
    } | sha256sum | cut -c1-64
}

digest=$(inputs_digest)
kept="$CACHE/wasm-pkg/$digest"
if [ -n "$digest" ] && [ "${KVW_WASM_FRESH:-0}" != 1 ] && [ -f "$kept/done" ]; then
    mkdir -p "$OUT"
    cp -R "$kept/pkg/." "$OUT/"
    echo "browser build: same inputs as the one kept in $kept (digest ${digest:0:12}); copied, not rebuilt (KVW_WASM_FRESH=1 rebuilds)"
    cat "$kept/build.log"
    exit 0
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
build en "$OUT" | tee "$log"
build it "$OUT/it" | tee -a "$log"

if [ -n "$digest" ]; then
    # Keep this build only: a later one with other inputs replaces it.
    rm -rf "$CACHE/wasm-pkg"
    mkdir -p "$kept/pkg"
    cp -R "$OUT/." "$kept/pkg/"
    # The size lines, printed again when the build is copied.
    sed "s|$OUT|(kept build)|g" "$log" >"$kept/build.log"
    touch "$kept/done"
fi
