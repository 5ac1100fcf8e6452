#!/bin/sh
# mesh-info --pp: the timeline of 1F1B with 2 stages drawn exactly, the closed-form bubbles and
# the peaks printed for each kind, zero-bubble below 1F1B, a schedule that Megatron's rules
# refuse (exit 1, reason), usage errors (exit 2), and the PNG when gnuplot is there.
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
    if grep -qF -- "$3" "$2"; then echo "ok: $1"; else
        echo "FAIL: $1: no [$3] in:"; cat "$2"; fail=1
    fi
}
bubble() { sed -n 's/^makespan [0-9.]*, bubble \([0-9.]*\).*/\1/p' "$1"; }

"$info" --pp 1f1b --stages 2 --microbatches 2 >"$tmp/out" 2>"$tmp/err"
check "1f1b p=2 m=2 exits 0" 0 $?
has "rank 0 row" "$tmp/out" "rank 0  |F0 F1 .. .. B0 -- .. B1 --"
has "rank 1 row" "$tmp/out" "rank 1  |.. F0 B0 -- F1 B1 -- .. .."
has "bubble 1/3" "$tmp/out" "makespan 9, bubble 0.3333 ((p-1)/(m+p-1) = 0.3333)"

"$info" --pp 1f1b --stages 4 --microbatches 8 >"$tmp/1f1b" 2>"$tmp/err"
check "1f1b p=4 m=8 exits 0" 0 $?
check "one row per stage" 4 "$(grep -c '^rank [0-9]' "$tmp/1f1b")"
has "1f1b bubble 3/11" "$tmp/1f1b" "bubble 0.2727 ((p-1)/(m+p-1) = 0.2727)"
has "1f1b peak p" "$tmp/1f1b" "peak stored activations: 4 on rank 0"
"$info" --pp gpipe --stages 4 --microbatches 8 >"$tmp/out" 2>"$tmp/err"
has "afab bubble 3/11" "$tmp/out" "bubble 0.2727 ((p-1)/(m+p-1) = 0.2727)"
has "afab peak m" "$tmp/out" "peak stored activations: 8 on rank 0"
"$info" --pp interleaved --stages 4 --microbatches 8 --chunks 2 >"$tmp/out" 2>"$tmp/err"
has "interleaved bubble 3/19" "$tmp/out" "bubble 0.1579 ((p-1)/(vm+p-1) = 0.1579)"
has "interleaved labels carry the chunk" "$tmp/out" "rank 0  |F0:0 F1:0"
"$info" --pp zb1 --stages 4 --microbatches 8 >"$tmp/zb1" 2>"$tmp/err"
has "zb1 splits the backward" "$tmp/zb1" "from its F until its W"
check "zb1 bubble below 1f1b's" 1 \
    "$(awk -v z="$(bubble "$tmp/zb1")" -v f="$(bubble "$tmp/1f1b")" 'BEGIN { print (z < f) }')"
"$info" --pp zbv --stages 4 --microbatches 8 >"$tmp/out" 2>"$tmp/err"
check "zbv exits 0" 0 $?
"$info" --pp 1f1b --stages 4 --microbatches 8 --costs 1,2,0,0.5 >"$tmp/out" 2>"$tmp/err"
has "costs with a message cost" "$tmp/out" "F 1, B 2, W 0, message 0.5"

"$info" --pp interleaved --stages 4 --microbatches 9 >"$tmp/out" 2>"$tmp/err"
check "interleaved m=9 p=4 exits 1" 1 $?
has "Megatron's rule named" "$tmp/err" \
    "micro-batches % group = 9 % 4 = 1 must be 0 or at least the stages (4)"
"$info" --pp 1f1b --stages 4 >"$tmp/out" 2>"$tmp/err"
check "missing --microbatches exits 2" 2 $?
"$info" --pp 3f3b --stages 4 --microbatches 8 >"$tmp/out" 2>"$tmp/err"
check "unknown schedule exits 2" 2 $?
has "unknown schedule named" "$tmp/err" "unknown schedule '3f3b'"
"$info" --pp 1f1b --stages 4 --microbatches 8 --costs 1,x,1 >"$tmp/out" 2>"$tmp/err"
check "bad costs exit 2" 2 $?

if command -v gnuplot >/dev/null 2>&1; then
    "$info" --pp zb1 --stages 4 --microbatches 8 --plot "$tmp/zb1.png" >"$tmp/out" 2>"$tmp/err"
    check "plot exits 0" 0 $?
    check "PNG written" 1 "$([ -s "$tmp/zb1.png" ] && echo 1)"
else
    echo "skip: no gnuplot, no plot"
fi
exit $fail
