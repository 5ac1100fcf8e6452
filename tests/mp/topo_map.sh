#!/bin/sh
# Node map and rank summaries on simulated nodes, each with its own topology fixture: block
# placement on 2 nodes, then cyclic placement on 3 nodes of unequal size with
# CUDA_VISIBLE_DEVICES choosing the GPUs.
set -e
b=${top_builddir:-.}
export MESH_TIMEOUT=${MESH_TIMEOUT:-60}
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
unset CUDA_VISIBLE_DEVICES MESH_LOCAL_GPU MESH_TOPO_FILE
"$b/tools/meshrun" -n 4 --nodes 2 --timeout 300 "$b/tests/mp/topo_map" --nodes 2
CUDA_VISIBLE_DEVICES=6,2 "$b/tools/meshrun" -n 5 --nodes 3 --placement cyclic --timeout 300 \
    "$b/tests/mp/topo_map" --nodes 3 --cyclic --visible 6,2
