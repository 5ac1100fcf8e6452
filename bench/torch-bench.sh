#!/bin/bash
# The mesh backend of torch.distributed against gloo and against mesh-bench, on 2 ranks of one
# node and 2 ranks on 2 simulated nodes (meshrun --nodes 2: network namespaces as root, so TCP).
# Each round runs bench/torch-bench.py (mesh through Python, mesh's C API on the same buffers
# and gloo taking turns inside) and then mesh-bench on the same placement, sizes and ops; the
# table shows busbw of mesh and gloo and their ratio turn by turn, mesh's over its C API's turn
# by turn (what the binding costs) and over mesh-bench's (another process, another moment),
# the 8-byte all_reduce latency against mesh-bench's, and the
# DDP step time of a communication-heavy model (2 nodes) on mesh and gloo, with the bound on
# their ratio where each rank has one CPU. On 2 nodes each round also measures iperf3 between
# the namespaces (one stream, and one each way at once), and the table shows iperf3's rate over
# gloo's busbw (iperf3/gloo), the ratio a plain TCP stream would reach. Targets: mesh/gloo
# >= 1.5 and mesh/C API >= 0.8 from 1 MiB, latency <= 2 x mesh-bench + 10 us, DDP step
# <= 0.7 x gloo's. CSV files and logs stay in the output folder.
set -u

usage() {
    cat <<USAGE
usage: $0 [-b min] [-e max] [-f factor] [-n iters] [-w warmup] [-r rounds] [-t turns]
          [--out DIR] [--builddir DIR] [--python PYTHON] [--placements 1node,2nodes]
          [--skip-iperf]
  -b/-e/-f      sizes (default 64k / 256m / 4)
  -n/-w         timed and warm-up iterations at 16 MiB (default 20 / 3); more below, up to
                10 times as many, fewer above, the same for mesh-bench
  -r rounds     runs of torch-bench.py and mesh-bench, one after the other (default 2)
  -t turns      mesh/C API/gloo turns inside each torch-bench.py run (default 3)
  --out DIR     where the CSV files and logs go (default: a new folder under /tmp)
  --builddir    build tree holding tools/meshrun, bench/mesh-bench and python/mesh_torch
  --python      the interpreter with torch (default: the one configure found)
  --skip-iperf  leave out iperf3 (it needs root and iperf3)
USAGE
}

minb=64k maxb=256m factor=4 iters=20 warmup=3 rounds=2 turns=3 out="" py="" skip_iperf=0
placements=1node,2nodes
builddir=$(cd "$(dirname "$0")/.." && pwd)
srcdir=$(cd "$(dirname "$0")/.." && pwd)
. "$srcdir/bench/compare_lib.sh"
extra_arg() {
    case $1 in
    -t) turns=$2 ;;
    --python) py=$2 ;;
    --placements) placements=$2 ;;
    *) return 1 ;;
    esac
}
parse_args "$@"
builddir=$(cd "$builddir" && pwd)
[ -n "$py" ] || py=$(sed -n 's/^TORCH_PYTHON = //p' "$builddir/Makefile" 2>/dev/null)
if [ -z "$py" ]; then
    echo "${0##*/}: mesh was configured without torch; give --python or configure --with-torch" >&2
    exit 2
fi
[ -n "$out" ] || out=$(mktemp -d /tmp/torch-bench.XXXXXX)
mkdir -p "$out"
export PYTHONPATH=$builddir/python${PYTHONPATH:+:$PYTHONPATH}
export OMP_NUM_THREADS=1 MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
MESHRUN=$builddir/tools/meshrun
MESHBENCH=$builddir/bench/mesh-bench
ops_mb=allreduce,allgather,reduce_scatter,alltoall,broadcast
status=0
iperf_check

# each size with its timed iterations, as torch-bench.py runs them
plan=$("$py" "$srcdir/bench/torch-bench.py" --plan -b "$minb" -e "$maxb" -f "$factor" -n "$iters") ||
    exit 2
echo "torch-bench: $rounds rounds, $turns turns each, sizes $minb..$maxb x$factor; output in $out"
for place in ${placements//,/ }; do
    case $place in
    1node) where="-n 2" ;;
    2nodes) where="-n 2 --nodes 2" ;;
    *) echo "unknown placement $place" >&2; exit 2 ;;
    esac
    ddp=--no-ddp
    [ "$place" = 2nodes ] && ddp="--ddp-steps 10"
    for r in $(seq 1 "$rounds"); do
        echo "round $r, $place: torch (mesh, its C API, gloo), then mesh-bench"
        run "torch-$place-$r" "$MESHRUN" $where --timeout 3000 "$py" "$srcdir/bench/torch-bench.py" \
            -b "$minb" -e "$maxb" -f "$factor" -n "$iters" -w "$warmup" --turns "$turns" $ddp \
            --csv "$out/torch-$place-$r.csv"
        while read -r size n; do
            run "mesh-bench-$place-$r-$size" "$MESHRUN" $where --timeout 3000 "$MESHBENCH" \
                -o "$ops_mb" -b "$size" -e "$size" -n "$n" -w "$warmup" \
                --csv "$out/mesh-bench-$place-$r-$size.csv"
        done <<<"$plan"
        run "mesh-lat-$place-$r" "$MESHRUN" $where --timeout 600 "$MESHBENCH" -o allreduce \
            -b 8 -e 8 -n 2000 -w 100 --csv "$out/mesh-lat-$place-$r.csv"
        [ "$place" = 2nodes ] && [ "$do_iperf" = 1 ] && iperf_round "$r"
    done
done
if [ "$do_iperf" = 1 ]; then
    iperf_medians
    # Gbit/s: one stream, and one direction of one stream each way at once
    echo "${iperf_one:-} ${iperf_per:-}" >"$out/iperf3.txt"
else
    echo "iperf3 $iperf_note"
fi
"$py" "$srcdir/bench/torch-bench.py" --report "$out" | tee "$out/table.txt"
echo "torch-bench: CSV files, logs and table.txt in $out"
exit $status
