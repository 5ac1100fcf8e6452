#!/bin/sh
# compare.sh: mesh and MPI in turns on one node and two simulated nodes, the tables with the
# median ratio and the range of single rounds, and mesh against memcpy of the same size.
. "${top_srcdir:-.}/bench/tests/lib.sh"
"${top_srcdir:-.}/bench/compare.sh" --builddir "$top_builddir" -o allreduce,allgather \
    -b 4k -e 16k -n 2 -w 1 -r 2 --skip-iperf --out "$tmp/out" >"$tmp/log" 2>&1
check "exit status" 0 $?
cat "$tmp/log"
mpi=0
[ -x "$top_builddir/bench/mpi/mpi-bench" ] && command -v mpirun >/dev/null && mpi=1
# a row: op, bytes, algo, mesh time, MPI time, both busbw, the median ratio, a low-high range
# around it; without MPI the MPI columns are dashes
rows=$(awk -v mpi="$mpi" '($1 == "allreduce" || $1 == "allgather") && NF == 9 {
    if (mpi) {
        if ($8 !~ /^[0-9]+\.[0-9]+$/ || split($9, r, "-") != 2) next
        if (r[1] + 0 > $8 + 0 || r[2] + 0 < $8 + 0) next
    } else if ($8 != "-" || $9 != "-") next
    c++ } END { print c + 0 }' "$tmp/log")
check "rows of both tables (MPI: $mpi)" 8 "$rows"
check "medians of 2 rounds" 2 "$(ls "$tmp/out"/mesh-1node.[12].csv 2>/dev/null | wc -l)"
check "all-reduce against memcpy" 1 \
    "$(grep -c '^  one node: allreduce of 16384 bytes at [0-9.]* GB/s busbw = [0-9.]* of memcpy' \
        "$tmp/log")"
check "iperf3 skipped" 1 "$(grep -c 'iperf3: skipped (--skip-iperf)' "$tmp/log")"
# the table from rounds of known times: MPI's first round is so slow that its busbw rounds
# to 0.0000 in the CSV, and that round must still count in the ratios
(
    . "${top_srcdir:-.}/bench/compare_lib.sh"
    out="$tmp/tab" rounds=2
    mkdir -p "$out"
    row() { # FILE TIME BUSBW
        printf '%s\n' "op,nranks,nodes,bytes,dtype,algo,time_us,algbw_GBps,busbw_GBps,wrong,in_place,redop,axis" \
            "allgather,2,2,4096,fp32,rd,$2,0,$3,0,0,none,world" >"$out/$1.csv"
    }
    row mesh-t.1 10.000 0.2048 && row mpi-t.1 123000.000 0.0000
    row mesh-t.2 10.000 0.2048 && row mpi-t.2 20.000 0.1024
    median "$out/mesh-t.csv" "$out"/mesh-t.[12].csv
    median "$out/mpi-t.csv" "$out"/mpi-t.[12].csv
    table t
) >"$tmp/table" 2>&1
cat "$tmp/table"
check "ratio and range from the times of every round" "6151.00 2.00-12300.00" \
    "$(awk '$1 == "allgather" { print $8, $9 }' "$tmp/table")"
"${top_srcdir:-.}/bench/compare.sh" --builddir "$top_builddir" -x 1 >"$tmp/bad" 2>&1
check "unknown argument refused" "2 yes" "$? $(grep -q "unknown argument '-x'" "$tmp/bad" && echo yes)"
exit $fail
