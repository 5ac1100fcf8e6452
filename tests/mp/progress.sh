#!/bin/sh
# Progress across communicators, tagged point-to-point, waitall/testany, the progress thread,
# a communicator shared by two threads, and the CPU use of ranks waiting a second for a peer: on
# 2 and 3 ranks of one node (shm) and on 2 simulated nodes (tcp). The ring algorithms make each
# all-reduce take many steps.
set -u
b=${top_builddir:-.}
export MESH_TIMEOUT=${MESH_TIMEOUT:-20}
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
export MESH_TUNE=allreduce:ring
prog="$b/tests/mp/progress_test"
status=0
run() {
    desc=$1
    shift
    if out=$("$@" 2>&1); then
        echo "ok: $desc"
    else
        echo "FAIL: $desc"
        printf '%s\n' "$out" | head -40
        status=1
    fi
}
for n in 2 3; do
    run "$n ranks, one node" "$b/tools/meshrun" -n $n --timeout 120 "$prog" cross tags anyall shared idle
done
run "4 ranks, 2 nodes" "$b/tools/meshrun" -n 4 --nodes 2 --timeout 120 "$prog" cross tags anyall \
    idle
run "4 ranks, cyclic on 2 nodes: 64 MiB from rank 0 to 1 over TCP, testany events" \
    env MESH_NET=tcp MESH_TCP_STREAMS=1 "$b/tools/meshrun" -n 4 --nodes 2 -p cyclic --timeout 120 \
    "$prog" events
run "1 rank" "$b/tools/meshrun" -n 1 --timeout 60 "$prog" tags anyall
run "progress thread, one node" env MESH_PROGRESS_THREAD=1 \
    "$b/tools/meshrun" -n 2 --timeout 60 "$prog" thread shared idle
run "progress thread, 2 nodes" env MESH_PROGRESS_THREAD=1 \
    "$b/tools/meshrun" -n 2 --nodes 2 --timeout 60 "$prog" thread idle
exit $status
