#!/bin/sh
# mesh-info --grid: groups as JSON for Megatron-Core's example layout, the failure (exit status
# and reason) of tp=4 over a round-robin placement, the same layout renumbered, invalid input,
# and its usage.
b=${top_builddir:-.}
info="$b/tools/mesh-info"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
export MESH_LOG_LEVEL=error
fail=0
check() {
    if [ "$2" = "$3" ]; then echo "ok: $1"; else echo "FAIL: $1: expected [$2] got [$3]"; fail=1; fi
}
has() { # has DESC FILE TEXT
    if grep -qF -- "$3" "$2"; then echo "ok: $1"; else echo "FAIL: $1: no [$3] in:"; cat "$2"; fail=1; fi
}

"$info" --grid tp=2,pp=2,dp=2 --order tp-pp-dp --world 8 --ranks-per-node 4 --json \
    >"$tmp/out" 2>"$tmp/err"
check "megatron example exits 0" 0 $?
has "tp groups" "$tmp/out" '"tp": [[0,1],[2,3],[4,5],[6,7]]'
has "pp groups" "$tmp/out" '"pp": [[0,2],[1,3],[4,6],[5,7]]'
has "dp groups" "$tmp/out" '"dp": [[0,4],[1,5],[2,6],[3,7]]'
has "tp-dp groups" "$tmp/out" '"tp-dp": [[0,1,4,5],[2,3,6,7]]'
has "fits" "$tmp/out" '"fits": true'
if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["axes"]["pp-dp"] == [[0,2,4,6],[1,3,5,7]], d' "$tmp/out"
    check "valid JSON with every combination" 0 $?
fi

"$info" --grid tp=4,dp=2 --world 8 --ranks-per-node 4 --placement cyclic --json \
    >"$tmp/out" 2>"$tmp/err"
check "tp=4 over a cyclic placement exits 1" 1 $?
has "fits false" "$tmp/out" '"fits": false'
has "reason on stderr" "$tmp/err" "tp=4 does not fit in a node: nodes have 4,4 ranks"
has "reason in JSON" "$tmp/out" '"error": "tp=4 does not fit in a node: nodes have 4,4 ranks'

"$info" --grid tp=4,dp=2 --world 8 --ranks-per-node 4 --placement cyclic --reorder --json \
    >"$tmp/out" 2>"$tmp/err"
check "renumbered exits 0" 0 $?
has "renumbered tp groups stay in a node" "$tmp/out" '"tp": [[0,2,4,6],[1,3,5,7]]'
has "renumbered reported" "$tmp/out" '"reordered": true'

"$info" --grid tp=2,cp=2,dp=2 --ranks-per-node 2 --intra cp >"$tmp/out" 2>"$tmp/err"
check "cp marked intra-node exits 1" 1 $?
has "cp named" "$tmp/err" "cp=2 does not fit in a node: nodes have 2,2,2,2 ranks"
has "text says no" "$tmp/out" "fits: no"

"$info" --grid tp=3,dp=2 --world 8 >"$tmp/out" 2>"$tmp/err"
check "size mismatch exits 1" 1 $?
has "size mismatch named" "$tmp/err" "tp=3 x cp=1 x ep=1 x dp=2 x pp=1 does not match the world size 8"
"$info" --grid tp=2,dp=4 --order tp-dp-qq >"$tmp/out" 2>"$tmp/err"
check "bad order exits 1" 1 $?
has "bad order named" "$tmp/err" "unknown axis 'qq'"
"$info" --grid tp=2,xx=4 >"$tmp/out" 2>"$tmp/err"
check "unknown axis is a usage error" 2 $?
has "unknown axis named" "$tmp/err" "'xx'"
# the usage mesh-info --help points at
"$info" --grid --help >"$tmp/out" 2>"$tmp/err"
check "--grid --help exits 0" 0 $?
has "--grid --help prints the usage" "$tmp/out" "usage: mesh-info --grid"
exit $fail
