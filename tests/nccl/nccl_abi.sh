#!/bin/sh
# NVIDIA's nccl.h ABI on mesh's libnccl.so.2: 1, 2 and 4 processes, then ncclCommInitAll.
b=${top_builddir:-.}
[ -x "$b/tests/nccl/nccl_abi" ] || { echo "NVIDIA's nccl.h was not found at configure time"; exit 77; }
export MESH_TIMEOUT=${MESH_TIMEOUT:-20}
# the test provokes argument errors on purpose: keep their warnings out of the log
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
exec "$b/tests/nccl/nccl_abi"
