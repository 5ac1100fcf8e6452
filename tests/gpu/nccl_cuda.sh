#!/bin/sh
# mesh's libnccl.so.2 on a GPU: 2 and 4 processes sharing GPU 0 run NCCL's collectives, grouped
# send/recv and pre-multiplied sums on cuMemAlloc buffers ordered on CUDA streams, with exact
# results (tests/nccl/nccl_device.c). Exits 77 without a CUDA driver and a GPU.
b=${top_builddir:-.}
prog="$b/tests/gpu/nccl_cuda"
[ -x "$prog" ] || { echo "$prog is not built (configure with libnccl)"; exit 77; }
export MESH_TIMEOUT=${MESH_TIMEOUT:-60}
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
exec "$prog" ${NCCL_CUDA_RANKS:-2 4}
