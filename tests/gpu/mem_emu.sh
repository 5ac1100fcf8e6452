#!/bin/sh
# The memory seam and the emulated device, with the table active (streams delayed, so that
# ordering shows) and with it off (its memory recognised, no table to drive it); mesh.h's device
# memory calls both ways.
b=${top_builddir:-.}
MESH_DEVICE_EMU=1 MESH_DEVICE_EMU_DELAY_US=200 MESH_DEVICE_EMU_DEVICE=1 "$b/tests/unit/test_mem_emu" || exit 1
MESH_DEVICE_EMU=0 "$b/tests/unit/test_mem_emu" || exit 1
# mesh.h's device memory calls, without a table and on the emulated one (the cuda table hidden)
MESH_CUDA_DRIVER=/nonexistent/libcuda.so.1 MESH_DEVICE_EMU=0 "$b/tests/unit/test_mem_api" || exit 1
MESH_CUDA_DRIVER=/nonexistent/libcuda.so.1 MESH_DEVICE_EMU=1 MESH_DEVICE_EMU_DELAY_US=200 \
    exec "$b/tests/unit/test_mem_api"
