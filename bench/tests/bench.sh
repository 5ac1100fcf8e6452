#!/bin/sh
# mesh-bench end to end: every op validated on 2 and 3 ranks (-c 1 makes a wrong element fail
# the run), one rank without a launcher, two simulated nodes, the CSV file and -a; expert
# dispatch + combine across two nodes on each path; the CPU use of a waiting rank (--idle);
# --min-time.
. "$(dirname "$0")/lib.sh"
ops=allreduce,reduce,broadcast,reduce_scatter,allgather,alltoall,gather,scatter,sendrecv

"$MESHRUN" -n 2 --timeout 120 "$BENCH" -o "$ops" -d fp32,int8,bf16,e5m2 -r sum,max \
    -b 0 -e 64k -f 16 -n 2 -w 1 -c 1 >"$tmp/out2" 2>&1
check "2 ranks, every op, validated" 0 $?
check "2 ranks: no wrong element" 1 "$(grep -c '^# wrong elements: 0 OK' "$tmp/out2")"

"$MESHRUN" -n 3 --timeout 120 "$BENCH" -o "$ops" -d fp32,uint64 -r prod,min -R 2 \
    -b 8 -e 32k -f 64 -n 2 -w 1 -c 1 --csv "$tmp/out3.csv" >"$tmp/out3" 2>&1
check "3 ranks, root 2, validated" 0 $?
header=op,nranks,nodes,bytes,dtype,algo,time_us,algbw_GBps,busbw_GBps,wrong,in_place,redop,axis,mem
check "csv header" "$header" "$(head -1 "$tmp/out3.csv")"
check "csv rows: no wrong element, 3 ranks, the whole communicator" 0 \
    "$(awk -F, 'NR > 1 && ($10 != 0 || $2 != 3 || $13 != "world")' "$tmp/out3.csv" | wc -l |
        tr -d ' ')"

"$BENCH" -o allreduce,allgather,sendrecv -b 8 -e 4k -f 8 -n 2 -w 1 >"$tmp/out1" 2>&1
check "one rank without a launcher" 0 $?
check "one rank reported" 1 "$(grep -c '^# mesh-bench: .* 1 rank on 1 node' "$tmp/out1")"

"$MESHRUN" -n 4 --nodes 2 --timeout 120 "$BENCH" -o allreduce,alltoall -b 8 -e 16k -f 32 -n 2 \
    -w 1 >"$tmp/out4" 2>&1
check "two simulated nodes" 0 $?
check "two nodes reported" 1 "$(grep -c '^# mesh-bench: .* 4 ranks on 2 nodes' "$tmp/out4")"
check "ranks of node 1 reach node 0 over tcp" 1 \
    "$(grep -c '^#   rank  2: node 1, .* 0:tcp' "$tmp/out4")"

"$MESHRUN" -n 2 "$BENCH" -o allreduce -a ring -b 1k -e 1k -n 2 -w 0 --csv "$tmp/ring.csv" \
    >"$tmp/outa" 2>&1
check "forced algorithm" 0 $?
check "forced algorithm reported" ring "$(awk -F, 'NR == 2 { print $6 }' "$tmp/ring.csv")"

"$BENCH" -o nonsense >/dev/null 2>&1
check "bad op is a usage error" 2 $?

for p in flat hier; do
    "$MESHRUN" -n 4 --nodes 2 --timeout 120 "$BENCH" -o dispatch_combine -d fp32,bf16 --skew 1.5 \
        --ep-path $p -b 8 -e 64k -f 32 -n 2 -w 1 --csv "$tmp/ep_$p.csv" >"$tmp/outep_$p" 2>&1
    check "dispatch_combine on the $p path, validated" 0 $?
    check "dispatch_combine: every row on the $p path, none wrong" 0 \
        "$(awk -F, -v p=$p 'NR > 1 && ($6 != p || $10 != 0)' "$tmp/ep_$p.csv" | wc -l | tr -d ' ')"
done

# --idle: the waiting rank sleeps while rank 0 does (under 20% of a core, generous for a loaded
# machine; a rank that spun would show about 100%)
"$MESHRUN" -n 2 --timeout 60 "$BENCH" --idle 0.5 >"$tmp/outidle" 2>&1
check "--idle runs" 0 $?
check "--idle: the waiting rank stays off the CPU" 1 "$(awk '
    /^# idle: most CPU of a waiting rank:/ { v = $NF; sub(/%/, "", v); print (v + 0 < 20) }' \
    "$tmp/outidle")"

# --min-time: 2 iterations of an 8-byte all-reduce take microseconds; timed for 0.3 s each, the
# out-of-place and in-place rows make the run last 0.6 s at least (the test is a lower bound)
t0=$(date +%s%N)
"$MESHRUN" -n 2 --timeout 60 "$BENCH" -b 8 -e 8 -n 2 -w 1 --min-time 0.3 >"$tmp/outmin" 2>&1
check "--min-time runs" 0 $?
check "--min-time: the rows lasted 0.6 s" 1 "$((($(date +%s%N) - t0) >= 600000000))"
check "--min-time reported" 1 "$(grep -c '^# each size timed for at least 0.3 s' "$tmp/outmin")"
"$BENCH" --min-time -1 >/dev/null 2>&1
check "negative --min-time is a usage error" 2 $?

[ $fail = 0 ] || for f in out2 out3 out1 out4 outa outep_flat outep_hier outidle outmin; do
    echo "--- $f"
    cat "$tmp/$f"
done
exit $fail
