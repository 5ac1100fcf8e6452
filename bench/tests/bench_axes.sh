#!/bin/sh
# mesh-bench per axis: a tp=2,dp=2,pp=2 grid on 8 ranks in 2 simulated nodes; every axis runs its
# ops validated (sendrecv alone along pp), with rows in the CSV and JSON for every axis and op and,
# when gnuplot is there, one PNG per op. Then the usage errors of --mesh.
. "$(dirname "$0")/lib.sh"
# rows of one axis and op: op,nranks,nodes,...,wrong,in_place,redop,axis,mem
rows() {
    awk -F, -v op="$1" -v axis="$2" -v nodes="$3" \
        'NR > 1 && $1 == op && $13 == axis && $2 == 2 && $3 == nodes && $10 == 0' \
        "$tmp/axes.csv" | wc -l | tr -d ' '
}

"$MESHRUN" -n 8 --nodes 2 --timeout 120 "$BENCH" --mesh tp=2,dp=2,pp=2 --axes all \
    -o allreduce,allgather,alltoall -b 1k -e 4k -f 4 -n 2 -w 1 -c 1 --csv "$tmp/axes.csv" \
    --json "$tmp/axes.json" --plot "$tmp/plots" >"$tmp/out" 2>&1
check "per-axis run on 8 ranks, 2 nodes" 0 $?
check "no wrong element" 1 "$(grep -c '^# wrong elements: 0 OK' "$tmp/out")"
check "one table per axis and op" 7 "$(grep -c '^# axis [tdp]p: [a-z]*, group size 2, 4 groups' \
    "$tmp/out")"
check "pp runs sendrecv alone" 1 "$(grep -c '^# axis pp: ' "$tmp/out")"
header=op,nranks,nodes,bytes,dtype,algo,time_us,algbw_GBps,busbw_GBps,wrong,in_place,redop,axis,mem
check "csv header" "$header" "$(head -1 "$tmp/axes.csv")"
# 2 sizes x 2 placements; sendrecv out of place only. Default order tp-cp-ep-dp-pp with ranks
# 0-3 on node 0: tp and dp groups stay in a node, pp groups span both.
for op in allreduce allgather alltoall; do
    check "csv rows of $op on tp" 4 "$(rows $op tp 1)"
    check "csv rows of $op on dp" 4 "$(rows $op dp 1)"
done
check "csv rows of sendrecv on pp" 2 "$(rows sendrecv pp 2)"
check "csv rows in all" 26 "$(($(wc -l <"$tmp/axes.csv") - 1))"
check "json rows in all" 26 "$(grep -c '^    {"op": ' "$tmp/axes.json")"
check "json rows of pp" 2 "$(grep -c '"op": "sendrecv", "axis": "pp", "nranks": 2, "groups": 4' \
    "$tmp/axes.json")"
if command -v gnuplot >/dev/null 2>&1; then
    for op in allreduce allgather alltoall sendrecv; do
        png="$tmp/plots/$op.png"
        check "png of $op" "89504e47" "$(od -An -tx1 -N4 "$png" 2>/dev/null | tr -d ' \n')"
        check "png of $op reported" 1 "$(grep -c "^# plot: $png\$" "$tmp/out")"
    done
    check "no other png" 4 "$(ls "$tmp/plots" | wc -l | tr -d ' ')"
else
    check "plots skipped with a message" 1 "$(grep -c '^# plots: gnuplot not found' "$tmp/out")"
fi

# round-robin placement: tp would span the nodes; --reorder renumbers the ranks so that it fits
"$MESHRUN" -n 8 --nodes 2 --placement cyclic --timeout 60 "$BENCH" --mesh tp=2,dp=2,pp=2 \
    -b 8 -e 8 -n 1 -w 0 >"$tmp/out4" 2>&1
check "cyclic placement without --reorder" 2 $?
check "tp named" 1 "$(grep -c 'error: rank 0: cannot build the mesh .*tp=2 does not fit' \
    "$tmp/out4")"
"$MESHRUN" -n 8 --nodes 2 --placement cyclic --timeout 60 "$BENCH" --mesh tp=2,dp=2,pp=2 \
    --reorder -b 8 -e 8 -n 1 -w 0 --csv "$tmp/cyclic.csv" >"$tmp/out5" 2>&1
check "cyclic placement with --reorder" 0 $?
check "tp, dp and pp rows after reordering" "allreduce,2,1,tp allreduce,2,1,dp sendrecv,2,2,pp" \
    "$(awk -F, 'NR > 1 && $11 == 0 { printf "%s%s,%s,%s,%s", (NR > 2 ? " " : ""), $1, $2, $3,
        $13 }' "$tmp/cyclic.csv")"

# without gnuplot in PATH the run stands and says why there is no plot
PATH=/nonexistent "$BENCH" --mesh tp=1 -b 8 -e 8 -n 1 -w 0 --plot "$tmp/none" >"$tmp/out1" 2>&1
check "one rank, no gnuplot" 0 $?
check "no gnuplot reported" 1 "$(grep -c '^# plots: gnuplot not found' "$tmp/out1")"

"$MESHRUN" -n 2 --timeout 60 "$BENCH" --mesh tp=2,dp=2 >"$tmp/out2" 2>&1
check "axes that do not multiply to the ranks" 2 $?
check "product reported" 1 "$(grep -c 'multiply to 4, not to the 2 ranks' "$tmp/out2")"
"$BENCH" --axes tp >/dev/null 2>&1
check "--axes without --mesh" 2 $?
"$BENCH" --mesh tp=1 --axes nonsense >"$tmp/out3" 2>&1
check "unknown axis" 2 $?

[ $fail = 0 ] || for f in out out1 out2 out3 out4 out5; do echo "--- $f"; cat "$tmp/$f"; done
exit $fail
