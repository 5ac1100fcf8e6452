#!/bin/sh
# Calls on emulated device buffers: stream ordering (1 to 4 ranks, and 4 ranks on 2 nodes), the
# refusals of mixed, foreign and unsupported buffers, and no active device table.
set -e
b=${top_builddir:-.}
run="$b/tools/meshrun"
prog="$b/tests/gpu/emu_stream"
export MESH_TIMEOUT=${MESH_TIMEOUT:-60}
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
export MESH_DEVICE_EMU=1 MESH_DEVICE_EMU_DELAY_US=20
for n in 1 2 3 4; do
    "$run" -n $n --timeout 300 "$prog" order
done
"$run" -n 2 --timeout 300 "$prog" errors
"$run" -n 4 --nodes 2 --timeout 300 "$prog" nodes
MESH_DEVICE_EMU=0 "$run" -n 2 --timeout 300 "$prog" notable
