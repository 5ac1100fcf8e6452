#!/bin/sh
# NVIDIA's nccl.h ABI on mesh's libnccl.so.2: 1, 2 and 4 processes, then ncclCommInitAll. Where
# NVIDIA's library was found too, the same program linked to it runs again with ours preloaded.
b=${top_builddir:-.}
[ -x "$b/tests/nccl/nccl_abi" ] || { echo "NVIDIA's nccl.h was not found at configure time"; exit 77; }
export MESH_TIMEOUT=${MESH_TIMEOUT:-20}
# the test provokes argument errors on purpose: keep their warnings out of the log
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
# host buffers only, also on a machine with a GPU: without a device table ncclMemAlloc gives host
# memory, which the program writes directly (tests/nccl/nccl_device.c covers device memory)
export MESH_CUDA_DRIVER=no-cuda-driver-for-this-test MESH_DEVICE_EMU=0
"$b/tests/nccl/nccl_abi" || exit 1
if [ -x "$b/tests/nccl/nccl_abi_preload" ]; then
    dir=$(cd "$b/nccl/.libs" && pwd)
    lib=$dir/libnccl.so.2 path=${LD_LIBRARY_PATH:-}
    case $dir in
    *" "*)
        # LD_PRELOAD splits at spaces: name the library and let LD_LIBRARY_PATH, which does
        # not, find it (the program checks which one it got)
        lib=libnccl.so.2 path=$dir${path:+:$path} ;;
    esac
    echo "linked to NVIDIA's libnccl.so.2, with LD_PRELOAD=$lib:"
    # a sanitized build needs its runtime first in the preload list
    asan=$(ldd "$b/tests/nccl/nccl_abi_preload" 2>/dev/null | awk '/libasan/ {print $3}')
    LD_LIBRARY_PATH=$path LD_PRELOAD="${asan:+$asan }$lib" "$b/tests/nccl/nccl_abi_preload" ||
        exit 1
fi
