#!/bin/sh
# compare-net.sh runs every usable network transport between 2 simulated nodes and prints one
# row per op and size with a busbw for each and the slowest/fastest ratio.
. "${top_srcdir:-.}/bench/tests/lib.sh"
"${top_srcdir:-.}/bench/compare-net.sh" --builddir "$top_builddir" -o allreduce,allgather \
    -b 4k -e 16k -n 2 -w 1 -r 2 --skip-iperf --out "$tmp/out" >"$tmp/log" 2>&1
check "exit status" 0 $?
cat "$tmp/log"
nets=$(sed -n 's/^mesh over \(.*\) between 2 simulated nodes.*/\1/p' "$tmp/log" | tr -d ' ')
check "tcp among the transports" yes "$(echo ",$nets," | grep -q ',tcp,' && echo yes)"
n=$(echo "$nets" | tr ',' '\n' | wc -l)
# a row: op, bytes, one busbw per transport, a ratio in [0, 1] (the figures themselves are
# whatever this machine gives)
rows=$(awk -v n="$n" '($1 == "allreduce" || $1 == "allgather") && NF == n + 3 {
    ok = 1; for (i = 3; i <= n + 2; i++) if ($i !~ /^[0-9]+\.[0-9]+$/) ok = 0
    if ($NF ~ /^[0-9.]+$/ && $NF + 0 <= 1 && ok) c++ } END { print c + 0 }' "$tmp/log")
check "rows with every transport's busbw and a ratio" 4 "$rows"
for t in $(echo "$nets" | tr ',' ' '); do
    check "$t: 2 rounds and the median" 3 "$(ls "$tmp/out/$t".*csv 2>/dev/null | wc -l)"
done
"${top_srcdir:-.}/bench/compare-net.sh" --builddir "$top_builddir" --nets bogus >"$tmp/bad" 2>&1
check "unknown transport refused" "2 yes" "$? $(grep -q "'bogus' is not usable" "$tmp/bad" && echo yes)"
exit $fail
