#!/bin/sh
# The pipeline executor against the single-process reference, every schedule, pp=2 and pp=4:
# over shared memory on one node, and between 2 simulated nodes (the pp links that cross them
# go over tcp); then pp=4 x dp=2 on 8 ranks, where the gradient of each chunk is all-reduced on
# dp from the grads_ready hook while the pipeline goes on, with messages of 32 KiB; last, a
# forward that fails on the last stage ends the step on every rank with a message, well within
# MESH_TIMEOUT, and the executors refuse another step.
set -u
b=${top_builddir:-.}
export MESH_TIMEOUT=${MESH_TIMEOUT:-60}
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
prog="$b/tests/parallel/pp_exec"
steps=3
[ "${MESH_TEST_SANITIZED:-0}" = 1 ] && steps=1
status=0
run() {
    desc=$1
    shift
    if out=$("$b/tools/meshrun" --timeout 120 "$@" 2>&1); then
        echo "ok: $desc"
        printf '%s\n' "$out" | sed 's/^/    /'
    else
        echo "FAIL: $desc"
        printf '%s\n' "$out" | head -60
        status=1
    fi
}
run "pp=2 over shm" -n 2 "$prog" --pp 2 --steps $steps
run "pp=4 over shm" -n 4 "$prog" --pp 4 --steps $steps
run "pp=2 over tcp between 2 nodes" -n 2 --nodes 2 "$prog" --pp 2 --steps $steps --cross
run "pp=4 on 2 nodes (tcp between stages 1 and 2)" -n 4 --nodes 2 "$prog" --pp 4 \
    --steps $steps --cross
run "pp=4 x dp=2 on 2 nodes, dp reductions from grads_ready, 32 KiB messages" -n 8 --nodes 2 \
    "$prog" --pp 4 --dp 2 --n 4096 --steps $steps --cross
MESH_TIMEOUT=10 run "a failing forward on pp=4 over 2 nodes" -n 4 --nodes 2 "$prog" --pp 4 --fail
exit $status
