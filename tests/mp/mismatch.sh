#!/bin/sh
# Mismatched calls across ranks fail on every rank with MESH_ERR_MISMATCH naming both calls:
# another collective, operation, datatype of the same size, count or root; over shm on one node
# and over tcp between 2 simulated nodes.
set -u
b=${top_builddir:-.}
export MESH_TIMEOUT=${MESH_TIMEOUT:-30}
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
# rank 0 gives up on a hang after 4 s and probes the others: on cores shared with other tests a
# live rank may not run for a while, and a probe it does not answer names it as stopped
export MESH_HANG_PROBE=${MESH_HANG_PROBE:-3}
status=0
run() {
    desc=$1
    shift
    if out=$("$@" 2>&1); then
        echo "ok: $desc"
        printf '%s\n' "$out" | grep -v "^ok" | head -10
    else
        echo "FAIL: $desc"
        # the failed checks first, then the start of the rest
        printf '%s\n' "$out" | grep '^\[rank ' | head -40
        printf '%s\n' "$out" | grep -v '^\[rank ' | head -20
        status=1
    fi
}
run "2 ranks, one node" "$b/tools/meshrun" -n 2 --timeout 120 "$b/tests/mp/mismatch"
run "3 ranks, one node" "$b/tools/meshrun" -n 3 --timeout 120 "$b/tests/mp/mismatch"
run "4 ranks, 2 nodes" "$b/tools/meshrun" -n 4 --nodes 2 --timeout 120 "$b/tests/mp/mismatch"
exit $status
