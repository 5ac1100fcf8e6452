#!/bin/sh
# API behaviour on 1, 3 and 4 ranks of one node, and on 2 simulated nodes x 2 ranks, where the
# byte counters must show shm inside a node and tcp between nodes.
set -e
b=${top_builddir:-.}
export MESH_TIMEOUT=${MESH_TIMEOUT:-60}
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
for n in 1 3 4; do
    "$b/tools/meshrun" -n $n --timeout 300 "$b/tests/mp/api_test" --expect-nodes 1
done
"$b/tools/meshrun" -n 4 --nodes 2 --timeout 300 "$b/tests/mp/api_test" --expect-nodes 2
