#!/bin/sh
# Pipeline bubbles, measured by the executor against the static checker's prediction, for every
# schedule at p=4, m=8 with callbacks that sleep (F = B = W = 2 ms), so the ranks need no cores
# to compute: over shared memory (4 ranks on one node), then over tcp between 2 simulated nodes
# (4 ranks placed round-robin, so that every pp link crosses the nodes). Not a test: the numbers
# move with the machine's load; each table gives medians over the steps.
#   bench/pp-bench.sh [--dp 2] [--rt] [--progress-thread] [pp-bench options...]
# --dp 2 runs two pipelines side by side (8 ranks); --rt runs the ranks under SCHED_FIFO
# (chrt -f 1, as root), so that other work on a busy machine does not delay their wake-ups;
# --progress-thread sets MESH_PROGRESS_THREAD=1. Options after those go to bench/pp-bench
# (bench/pp-bench --help).
set -u
here=$(cd "$(dirname "$0")" && pwd)
b=${top_builddir:-$here/..}
meshrun="$b/tools/meshrun"
prog="$b/bench/pp-bench"
dp=1
rt=
while [ $# -gt 0 ]; do
    case $1 in
    --dp) dp=$2; shift 2 ;;
    --rt) rt="chrt -f 1"; shift ;;
    --progress-thread) export MESH_PROGRESS_THREAD=1; shift ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) break ;;
    esac
done
for f in "$meshrun" "$prog"; do
    [ -x "$f" ] || { echo "pp-bench.sh: $f is not built (make)" >&2; exit 2; }
done
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
export MESH_TIMEOUT=${MESH_TIMEOUT:-120}
n=$((4 * dp))
echo "# $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)," \
    "MESH_PROGRESS_THREAD=${MESH_PROGRESS_THREAD:-0}, ${rt:-normal scheduling}"
status=0
echo "## shared memory: $n ranks on one node"
$rt "$meshrun" -n $n --timeout 600 "$prog" --pp 4 --dp "$dp" "$@" || status=1
echo
echo "## tcp: $n ranks on 2 simulated nodes, placed round-robin (every pp link crosses nodes)"
$rt "$meshrun" -n $n --nodes 2 --placement cyclic --timeout 600 "$prog" --pp 4 --dp "$dp" \
    "$@" || status=1
exit $status
