#!/bin/sh
# Mismatched calls across ranks fail on every rank with MESH_ERR_MISMATCH naming both calls:
# another collective, operation, datatype of the same size, count or root; over shm on one node
# and over tcp between 2 simulated nodes.
set -u
b=${top_builddir:-.}
export MESH_TIMEOUT=${MESH_TIMEOUT:-30}
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
status=0
run() {
    desc=$1
    shift
    if out=$("$@" 2>&1); then
        echo "ok: $desc"
        printf '%s\n' "$out" | grep -v "^ok" | head -10
    else
        echo "FAIL: $desc"
        printf '%s\n' "$out" | head -40
        status=1
    fi
}
run "2 ranks, one node" "$b/tools/meshrun" -n 2 --timeout 120 "$b/tests/mp/mismatch"
run "3 ranks, one node" "$b/tools/meshrun" -n 3 --timeout 120 "$b/tests/mp/mismatch"
run "4 ranks, 2 nodes" "$b/tools/meshrun" -n 4 --nodes 2 --timeout 120 "$b/tests/mp/mismatch"
exit $status
