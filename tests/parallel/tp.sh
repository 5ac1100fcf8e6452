#!/bin/sh
# Tensor and sequence parallelism against the unsplit math (tests/parallel/tp_test.c) for
# tp = 1, 2, 3, 4 with and without sequence parallelism; tp groups of a tp=2 x dp=2 grid side by
# side, on one node and with dp across 2 simulated nodes.
set -u
b=${top_builddir:-.}
export MESH_TIMEOUT=${MESH_TIMEOUT:-60}
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
prog="$b/tests/parallel/tp_test"
status=0
run() {
    n=$1
    shift
    desc="-n $n $*"
    if out=$("$b/tools/meshrun" -n "$n" --timeout 120 "$@" 2>&1); then
        echo "ok: $desc"
    else
        echo "FAIL: $desc"
        printf '%s\n' "$out" | head -40
        status=1
    fi
}
run 1 "$prog" --tp 1
run 1 "$prog" --tp 1 --sp
for tp in 2 3 4; do
    run $tp "$prog" --tp $tp
    run $tp "$prog" --tp $tp --sp
done
run 4 "$prog" --tp 2 --sp
run 4 --nodes 2 "$prog" --tp 2
run 4 --nodes 2 "$prog" --tp 2 --sp
exit $status
