#!/bin/sh
# The memory seam and the emulated device, with the table active (streams delayed, so that
# ordering shows) and with it off (its memory recognised, no table to drive it).
b=${top_builddir:-.}
MESH_DEVICE_EMU=1 MESH_DEVICE_EMU_DELAY_US=200 MESH_DEVICE_EMU_DEVICE=1 "$b/tests/unit/test_mem_emu" || exit 1
MESH_DEVICE_EMU=0 exec "$b/tests/unit/test_mem_emu"
