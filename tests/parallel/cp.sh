#!/bin/sh
# Context-parallel causal attention against the unsplit math (tests/parallel/cp_test.c): cp = 1,
# 2, 3, 4 with ring and all-gather, contiguous and zig-zag sharding, the ring without overlap;
# cp=2 groups of a cp=2 x dp=2 grid side by side, on one node and across 2 simulated nodes.
set -u
b=${top_builddir:-.}
export MESH_TIMEOUT=${MESH_TIMEOUT:-60}
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
prog="$b/tests/parallel/cp_test"
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
for cp in 1 2 3 4; do
    for zz in "" --zigzag; do
        # shellcheck disable=SC2086
        run $cp "$prog" --cp $cp $zz
        # shellcheck disable=SC2086
        run $cp "$prog" --cp $cp $zz --allgather
    done
done
for cp in 2 3 4; do
    run $cp "$prog" --cp $cp --no-overlap
    run $cp "$prog" --cp $cp --zigzag --no-overlap
done
run 4 "$prog" --cp 2 --zigzag
run 4 "$prog" --cp 2 --allgather
run 4 --nodes 2 "$prog" --cp 2 --zigzag
run 4 --nodes 2 "$prog" --cp 4
exit $status
