#!/bin/sh
# mesh-bench on device buffers of the GPU (-m cuda), K ranks sharing the one device:
#
#   tests/gpu/bench_gpu.sh K
#
# allgather, broadcast and allreduce (fp32 sum) from 1 MiB to BENCH_GPU_MAX (default 256m) by
# factors of 16, each size validated once (-c 1) and timed BENCH_GPU_ITERS times (default 3;
# the bench also measures the device-to-device copy of each size, the bound), then 8-byte
# allreduce latency over 200 calls. Prints the bench's tables, then one line per op at the
# largest size (busbw, copy rate, and rx/copy: the bytes all ranks receive per second over the
# copy rate, out of place and in place) and, last, a summary line. Exits 0 when both runs passed with no wrong element,
# 77 when no cuda table is active (no GPU or driver), else 1. tests/gpu/device-check.sh runs it.
# BENCH_GPU_MEM=emu runs the same on the emulated device (a check of this script, with small
# sizes: BENCH_GPU_MAX=16m).
set -u
b=${top_builddir:-.}
if [ $# -ne 1 ]; then
    echo "usage: $0 K" >&2
    exit 2
fi
k=$1
max=${BENCH_GPU_MAX:-256m}
iters=${BENCH_GPU_ITERS:-3}
lim=${BENCH_GPU_RUN_TIMEOUT:-120}
mem=${BENCH_GPU_MEM:-cuda}
. "$(dirname "$0")/bench_lib.sh"
need_device "$mem"
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT

"$b/tools/meshrun" -n "$k" --timeout "$lim" "$b/bench/mesh-bench" -m "$mem" \
    -o allgather,broadcast,allreduce -b 1m -e "$max" -f 16 -n "$iters" -w 1 -c 1 >"$out/bw" 2>&1
rc_bw=$?
cat "$out/bw"
"$b/tools/meshrun" -n "$k" --timeout "$lim" "$b/bench/mesh-bench" -m "$mem" -o allreduce \
    -b 8 -e 8 -n 200 -w 20 -c 1 >"$out/lat" 2>&1
rc_lat=$?
cat "$out/lat"

# the largest size's row of each table: op, size, busbw, copybw, recv/copy (out of place)
awk -v k="$k" '
    /^# [a-z_]+: [0-9]+ ranks? on/ { op = $2; sub(/:$/, "", op) }
    !/^#/ && NF >= 17 { last[op] = $0 }
    END {
        for (op in last) {
            split(last[op], f, " ")
            printf "bench_gpu: k=%s %s %s B: busbw %s GB/s out of place, %s in place; copy %s GB/s; rx/copy %s, %s\n",
                k, op, f[1], f[8], f[12], f[14], f[15], f[16]
        }
    }' "$out/bw" | sort
lat=$(awk '!/^#/ && NF >= 17 { print $6 " us out of place, " $10 " us in place" }' "$out/lat")
wrong=$(cat "$out/bw" "$out/lat" | grep -c '^# wrong elements: 0 OK')
summary=$(awk '/^# [a-z_]+: [0-9]+ ranks? on/ { op = $2; sub(/:$/, "", op) }
    !/^#/ && NF >= 17 { v[op] = $15; size = $1 }
    END { printf "at %s B:", size; for (o in v) printf "%s %s %s", n++ ? "," : "", o, v[o] }' \
    "$out/bw")
echo "bench_gpu: k=$k: rx/copy ${summary:-none}; 8 B allreduce: ${lat:-none};" \
    "rc $rc_bw/$rc_lat, runs without wrong elements $wrong of 2"
[ "$rc_bw" = 0 ] && [ "$rc_lat" = 0 ] && [ "$wrong" = 2 ]
