#!/bin/sh
# Device buffers inside a node by device copies between IPC mappings, on the emulated device
# (tests/gpu/dev_ipc.c; device-check.sh runs it on the GPU):
# all-gather, broadcast, all-reduce, reduce-scatter and all-to-all on 2, 3, 4 and 8 ranks by IPC
# (counted), the mapping cache hit on a repeat and renewed for a buffer reallocated at the same
# address; then with MESH_DEVICE_IPC=0 the same calls staged, and the conformance suite of those
# collectives staged (none by IPC); last, all-reduce by IPC with a cache of one mapping
# (MESH_DEVICE_IPC_CACHE=1); exact values and guard bytes throughout.
set -u
b=${top_builddir:-.}
run="$b/tools/meshrun"
export MESH_TIMEOUT=${MESH_TIMEOUT:-60}
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
export MESH_DEVICE_EMU=1 MESH_DEVICE_EMU_DELAY_US=${MESH_DEVICE_EMU_DELAY_US:-20}
ranks=${MESH_TEST_RANKS:-"2 3 4 8"}
status=0
for n in $ranks; do
    # one rank has no peer to map: its calls run locally (MESH_TEST_RANKS may name 1)
    [ "$n" -ge 2 ] || continue
    for mode in ipc staged; do
        ipc=1
        [ $mode = staged ] && ipc=0
        out=$(MESH_DEVICE_IPC=$ipc "$run" -n $n --timeout 300 "$b/tests/gpu/dev_ipc" $mode 2>&1)
        rc=$?
        printf 'dev_ipc %-6s ranks=%d rc=%d\n' $mode $n $rc
        [ $rc -eq 0 ] || { printf '%s\n' "$out" | head -30; status=1; }
    done
    for coll in allgather broadcast allreduce reduce_scatter alltoall; do
        out=$(MESH_DEVICE_IPC=0 "$run" -n $n --timeout 300 "$b/tests/mp/conformance" -o $coll \
            -a ipc -D -q -s 2>&1)
        rc=$?
        used=$(printf '%s\n' "$out" | sed -n 's/^USED //p')
        printf 'staged %-10s ranks=%d rc=%d by ipc=%s\n' $coll $n $rc "$used"
        if [ $rc -ne 0 ] || [ "$used" != 0 ]; then
            printf '%s\n' "$out" | head -30
            status=1
        fi
    done
done
# a cache of one mapping: every call unmaps and maps again, repeated calls included
out=$(MESH_DEVICE_IPC_CACHE=1 "$run" -n 3 --timeout 300 "$b/tests/mp/conformance" -o allreduce \
    -a ipc -D -q -s -r 2 -d int32,fp32 2>&1)
rc=$?
used=$(printf '%s\n' "$out" | sed -n 's/^USED //p')
printf 'cache=1 allreduce ranks=3 rc=%d by ipc=%s %s\n' $rc "$used" \
    "$(printf '%s\n' "$out" | grep '^IPC')"
if [ $rc -ne 0 ] || [ -z "$used" ] || [ "$used" = 0 ]; then
    printf '%s\n' "$out" | head -30
    status=1
fi
exit $status
