#!/bin/sh
# mesh-bench's per-axis curves on device buffers across simulated nodes: --device --mesh ...
# --axes all under meshrun --nodes, every axis's ops validated (no wrong element), CSV and JSON
# rows of every axis with the memory named (mem emu or cuda), tp inside a node (all-reduce and
# all-gather by IPC) and the other axes across nodes (staged), one PNG per op (a gnuplot script
# per op where gnuplot is missing), and mesh-plan --calibrate reading the CSV and saying which
# memory it measured.
#
#   bench/tests/bench_device_axes.sh [MEM [MESH RANKS NODES EXPECT]]
#
# MEM: emu (default) or cuda; MESH, RANKS, NODES: the grid and where it runs (default tp=2,dp=2
# on 4 ranks in 2 nodes); EXPECT: each axis measured and the nodes a group of it spans, by
# commas (default tp:1,dp:2). make check runs the defaults with small sizes;
# tests/gpu/device-check.sh runs cuda tp=2,dp=2,pp=2 8 4 tp:1,dp:2,pp:2. BENCH_AXES_MAX: the
# largest size (sizes from 4 KiB by factors of 8; default 256k); BENCH_AXES_OUT: a folder that
# keeps the CSV, JSON, plots and mesh-plan's output (default: a scratch folder).
. "$(dirname "$0")/lib.sh"
mem=${1:-emu}
layout=${2:-tp=2,dp=2}
n=${3:-4}
k=${4:-2}
expect=${5:-tp:1,dp:2}
max=${BENCH_AXES_MAX:-256k}
out=${BENCH_AXES_OUT:-$tmp}
ops=allreduce,allgather,reduce_scatter,alltoall
PLAN="$top_builddir/tools/mesh-plan"
export MESH_TIMEOUT=${MESH_TIMEOUT:-60}
case $mem in
emu)
    # the emulated device alone, also on a machine with a GPU
    export MESH_DEVICE_EMU=1 MESH_CUDA_DRIVER=/nonexistent/libcuda.so.1 ;;
*) unset MESH_DEVICE_EMU ;;
esac
mkdir -p "$out" || exit 99
dev=$("$top_builddir/tools/mesh-info" | grep '^  device     :')
case $dev in
*": $mem active"*) ;;
*)
    echo "no $mem device table here (mesh-info:${dev#*:}): skipped"
    exit 77
    ;;
esac

"$MESHRUN" -n "$n" --nodes "$k" --timeout 300 "$BENCH" -m "$mem" --mesh "$layout" --axes all \
    -o "$ops" -b 4k -e "$max" -f 8 -n 2 -w 1 -c 1 --csv "$out/axes.csv" --json "$out/axes.json" \
    --plot "$out/plots" >"$out/bench.out" 2>&1
check "per axis on $mem device buffers, $n ranks on $k nodes" 0 $?
check "no wrong element" 1 "$(grep -c '^# wrong elements: 0 OK' "$out/bench.out")"
check "the device table named" 1 "$(grep -c "^# device buffers of the $mem table, on a stream" \
    "$out/bench.out")"
check "csv header" \
    op,nranks,nodes,bytes,dtype,algo,time_us,algbw_GBps,busbw_GBps,wrong,in_place,redop,axis,mem \
    "$(head -1 "$out/axes.csv")"
check "every csv row of $mem memory, checked, none wrong" 0 \
    "$(awk -F, -v m="$mem" 'NR > 1 && ($14 != m || $10 != 0)' "$out/axes.csv" | wc -l | tr -d ' ')"
check "json names the memory" 1 "$(grep -c "^  \"mem\": \"$mem\",\$" "$out/axes.json")"
axes=
for e in $(echo "$expect" | tr , " "); do
    axis=${e%:*} nodes=${e#*:}
    axes="$axes${axes:+ }$axis"
    # pp runs sendrecv alone; the other axes every op of the list
    want=4
    [ "$axis" = pp ] && want=1
    check "ops measured on $axis, its groups spanning $nodes node(s)" $want \
        "$(awk -F, -v a="$axis" -v k="$nodes" 'NR > 1 && $13 == a && $3 == k { print $1 }' \
            "$out/axes.csv" | sort -u | wc -l | tr -d ' ')"
done
# inside a node the data moves by device copies between IPC mappings; across nodes it is staged
# and the host algorithms run
check "tp's all-reduce and all-gather by ipc" "allgather:ipc allreduce:ipc" \
    "$(awk -F, '$13 == "tp" && ($1 == "allreduce" || $1 == "allgather") { print $1 ":" $6 }' \
        "$out/axes.csv" | sort -u | tr '\n' ' ' | sed 's/ $//')"
check "no ipc across nodes" 0 \
    "$(awk -F, 'NR > 1 && $3 > 1 && $6 == "ipc"' "$out/axes.csv" | wc -l | tr -d ' ')"
check "the axes measured" "$axes" \
    "$(awk -F, 'NR > 1 && !seen[$13]++ { printf "%s%s", n++ ? " " : "", $13 }' "$out/axes.csv")"

# one plot per op that ran (sendrecv along pp), titled with the memory
count() { [ -e "$1" ] && echo $# || echo 0; }
nops=4
case " $axes " in *" pp "*) nops=5 ;; esac
if command -v gnuplot >/dev/null 2>&1; then
    for png in "$out"/plots/*.png; do
        check "png $(basename "$png")" 89504e47 "$(od -An -tx1 -N4 "$png" | tr -d ' \n')"
    done
    check "a png per op" $nops "$(count "$out"/plots/*.png)"
else
    check "a gnuplot script per op without gnuplot" $nops "$(count "$out"/plots/*.gp)"
fi

# the planner's calibration from that run, which says what it measured
if [ -x "$PLAN" ]; then
    "$PLAN" --calibrate "$out/axes.csv" >"$out/calibrate.out" 2>&1
    check "mesh-plan --calibrate reads it" 0 $?
    check "the calibration names the memory" 1 \
        "$(grep -c "^calibration from .*, measured on $mem device buffers\$" "$out/calibrate.out")"
    for e in $(echo "$expect" | tr , " "); do
        axis=${e%:*} nodes=${e#*:}
        op=allreduce
        [ "$axis" = pp ] && op=sendrecv
        check "a calibrated $op curve of $axis over $nodes node(s)" 1 \
            "$(grep -c "^  $axis  *$op  *2  *$nodes " "$out/calibrate.out")"
    done
fi

[ $fail = 0 ] || for f in bench.out calibrate.out; do
    echo "--- $f"
    cat "$out/$f"
done
exit $fail
