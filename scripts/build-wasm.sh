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

build en "$OUT"
build it "$OUT/it"
