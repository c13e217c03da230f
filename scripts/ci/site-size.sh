#!/usr/bin/env bash
# The explorer's size for the whole fix matrix, measured against the target.
#
#   scripts/ci/site-size.sh KVW_BIN WASM_DIR
#
# Signs the full matrix (`kvw bundle`, every combination at both scales,
# the gates and the model-check counterexample) with a throwaway key, builds
# its site with the browser build in WASM_DIR (scripts/build-wasm.sh output)
# and prints what it weighs: uncompressed, on disk with the precompressed
# copies, and over the wire (every file fetched once as brotli, the way
# `kvw serve` answers a browser). Fails if the brotli total is over 8 MB
# (sizes are deterministic, unlike timings; the times printed are figures).
set -euo pipefail

kvw=$(realpath "$1")
wasm=$(realpath "$2")
limit=8000000
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

"$kvw" keygen --out "$dir/key" >/dev/null
key="$dir/key/signing-key.json"
rc=0
"$kvw" check --fixes none --requests 1 --key "$key" --out "$dir/model-check.json" >/dev/null 2>&1 || rc=$?
[[ $rc -eq 1 ]] || { echo "site-size: kvw check --fixes none should find the counterexample (exit 1), got $rc" >&2; exit 1; }
t0=$(date +%s.%N)
"$kvw" bundle --out "$dir/bundle" --model-check "$dir/model-check.json" --key "$key" | tail -1
t1=$(date +%s.%N)
"$kvw" site build --bundle "$dir/bundle" --out "$dir/site" --wasm "$wasm" | grep -v '^open '
t2=$(date +%s.%N)

python3 - "$dir/site" "$limit" "$t0" "$t1" "$t2" <<'EOF'
import os, sys
site, limit = sys.argv[1], int(sys.argv[2])
t0, t1, t2 = map(float, sys.argv[3:6])
plain = disk = wire = 0
files = 0
for root, _, names in os.walk(site):
    for n in names:
        p = os.path.join(root, n)
        size = os.path.getsize(p)
        disk += size
        if n.endswith((".gz", ".br")):
            continue
        files += 1
        plain += size
        wire += os.path.getsize(p + ".br") if os.path.exists(p + ".br") else size
mb = lambda n: f"{n / 1e6:.2f} MB"
print(f"full-matrix site: {files} files; {mb(plain)} uncompressed, {mb(disk)} on disk with the .gz/.br copies, "
      f"{mb(wire)} over the wire as brotli (target ≤ {mb(limit)})")
print(f"time: kvw bundle {t1 - t0:.1f} s, kvw site build {t2 - t1:.1f} s (figures, not asserted)")
if wire > limit:
    sys.exit(f"site-size: {mb(wire)} over the wire is above the {mb(limit)} target")
EOF
