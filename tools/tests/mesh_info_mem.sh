#!/bin/sh
# mesh-info names the device table in use and the memory types buffers may have: none and host
# memory alone without a table, emu with MESH_DEVICE_EMU=1; -A says how device buffers go
# through the algorithms. The cuda table is hidden, so that the output is the same with a GPU.
b=${top_builddir:-.}
info="$b/tools/mesh-info"
fail=0
check() {
    if [ "$2" = "$3" ]; then echo "ok: $1"; else echo "FAIL: $1: expected [$2] got [$3]"; fail=1; fi
}
export MESH_CUDA_DRIVER=/nonexistent/libcuda.so.1
unset MESH_DEVICE_EMU
if grep -q '^#define HAVE_CUDA 1' "$b/config.h" 2>/dev/null; then built="cuda, and emu"; else built=emu; fi

out=$("$info")
check "no table: none active" "  device     : none active (tables built: $built under MESH_DEVICE_EMU=1)" \
    "$(echo "$out" | grep '^  device     :')"
check "no table: host memory alone" "  memory     : host" "$(echo "$out" | grep '^  memory     :')"

out=$(MESH_DEVICE_EMU=1 "$info")
check "emu: active" "  device     : emu active (tables built: $built under MESH_DEVICE_EMU=1)" \
    "$(echo "$out" | grep '^  device     :')"
check "emu: host, pinned and device memory" "  memory     : host, host-pinned, device" \
    "$(echo "$out" | grep '^  memory     :')"

out=$(MESH_DEVICE_EMU=1 "$info" -A --comm-size 4)
check "-A: the path of device buffers" \
    "# device buffers (emu table): on the caller's stream; within one node by device copies" \
    "$(echo "$out" | grep '^# device buffers')"
out=$("$info" -A)
check "-A without a table" 1 "$(echo "$out" | grep -c '^# device buffers (no device table active): on the')"
exit $fail
