#!/bin/sh
# Device all-reduce between 2 simulated nodes against mesh's own host-buffer all-reduce between
# the same nodes, in one run: 2 ranks under meshrun --nodes 2 (network namespaces when root, tcp
# between them), fp32 sum from BENCH_NODES_MIN (64m) to BENCH_NODES_MAX (256m) by factors of 2,
# BENCH_NODES_ITERS timed calls (5) after one, validated once (-c 1). Host and device runs
# alternate BENCH_NODES_ROUNDS times (2), and each size keeps the best out-of-place busbw of each
# memory, so that a burst of noise does not decide the ratio. Prints a line per size (host busbw,
# device busbw, device/host) and last the smallest ratio; exits 0 when every run passed with no
# wrong element and that ratio is at least BENCH_NODES_RATIO (0.85: staging through pinned host
# memory costs little), 77 without the device table, else 1. tests/gpu/device-check.sh runs it.
# BENCH_GPU_MEM=emu runs the same on the emulated device (a check of this script; its staging
# copies are host copies, so give it BENCH_NODES_RATIO=0 on a busy machine).
set -u
b=${top_builddir:-.}
mem=${BENCH_GPU_MEM:-cuda}
lo=${BENCH_NODES_MIN:-64m}
hi=${BENCH_NODES_MAX:-256m}
iters=${BENCH_NODES_ITERS:-5}
rounds=${BENCH_NODES_ROUNDS:-2}
want=${BENCH_NODES_RATIO:-0.85}
lim=${BENCH_NODES_RUN_TIMEOUT:-120}
. "$(dirname "$0")/bench_lib.sh"
need_device "$mem"
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT

status=0 runs=0 clean=0
for round in $(seq 1 "$rounds"); do
    for m in host "$mem"; do
        memarg=
        [ "$m" = host ] || memarg="-m $m"
        # shellcheck disable=SC2086 # memarg is empty or two words
        "$b/tools/meshrun" -n 2 --nodes 2 --timeout "$lim" "$b/bench/mesh-bench" $memarg \
            -o allreduce -d fp32 -r sum -b "$lo" -e "$hi" -f 2 -n "$iters" -w 1 -c 1 \
            --csv "$out/$m.$round.csv" >"$out/$m.$round.out" 2>&1
        rc=$?
        runs=$((runs + 1))
        grep -q '^# wrong elements: 0 OK' "$out/$m.$round.out" && clean=$((clean + 1))
        if [ $rc != 0 ]; then
            echo "bench_nodes: the $m run of round $round failed (rc $rc):"
            tail -20 "$out/$m.$round.out"
            status=1
        fi
    done
done
cat "$out/$mem.1.out"
# the best out-of-place busbw (column 9) of each size (4) and memory (14), a line per size, then
# the smallest ratio alone
awk -F, -v dev="$mem" '
    FNR == 1 { next }
    $11 == 0 { if ($9 > best[$14, $4]) best[$14, $4] = $9; size[$4] = 1 }
    END {
        worst = -1
        for (s in size) {
            h = best["host", s]; d = best[dev, s]
            r = h > 0 ? d / h : 0
            printf "bench_nodes: %12d B between 2 nodes: host %8.3f GB/s, %s device %8.3f GB/s, " \
                "device/host %.3f\n", s, h, dev, d, r
            if (worst < 0 || r < worst) worst = r
        }
        printf "%.3f\n", worst
    }' "$out"/*.csv >"$out/ratios"
grep '^bench_nodes' "$out/ratios" | sort -n -k2
ratio=$(tail -1 "$out/ratios")
echo "bench_nodes: $mem: device/host allreduce busbw between 2 nodes, $lo to $hi: smallest" \
    "ratio $ratio (want >= $want); runs without wrong elements $clean of $runs"
[ $status = 0 ] && [ "$clean" = "$runs" ] &&
    awk -v r="$ratio" -v w="$want" 'BEGIN { exit !(r >= 0 && r + 0 >= w + 0) }'
