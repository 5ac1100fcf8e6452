#!/bin/sh
# Device buffers across simulated nodes by the hierarchical path (collectives/device/dev_hier.h),
# on the emulated device (tests/gpu/dev_hier.c): all-reduce, all-gather, broadcast and
# reduce-scatter on 2 nodes x 2 ranks, 2 nodes x 3 ranks and 3 nodes x 2 ranks by IPC inside the
# nodes and the rails between them (counted: calls, peers' buffers looked up, bytes staged per
# rank equal to its inter-node share); the same calls staged on unequal nodes (2 + 1) and with
# MESH_DEVICE_HIER=0, refused with MESH_DEVICE_HIER=1 where the layout does not allow the path;
# a silent rank fails the others' calls on their streams within the timeout; then the conformance
# suite of those collectives on 2 x 3 (every dtype and op, in place or not, exact, guard bytes),
# the calls that took the path counted, and on 2 + 1, where none does. Exact values throughout.
set -u
b=${top_builddir:-.}
run="$b/tools/meshrun"
export MESH_TIMEOUT=${MESH_TIMEOUT:-60}
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
export MESH_DEVICE_EMU=1 MESH_DEVICE_EMU_DELAY_US=${MESH_DEVICE_EMU_DELAY_US:-20}
status=0

# mode ranks nodes [VAR=value]
hier() {
    out=$(env ${4:-MESH_DEVICE_HIER=auto} "$run" -n $2 --nodes $3 --timeout 300 \
        "$b/tests/gpu/dev_hier" $1 2>&1)
    rc=$?
    printf 'dev_hier %-8s ranks=%d nodes=%d %s rc=%d\n' $1 $2 $3 "${4:-}" $rc
    [ $rc -eq 77 ] && exit 77
    [ $rc -eq 0 ] || { printf '%s\n' "$out" | head -30; status=1; }
}
hier hier 4 2
hier hier 6 2
hier hier 6 3
hier staged 3 2
hier staged 4 2 MESH_DEVICE_HIER=0
hier refused 3 2 MESH_DEVICE_HIER=1
hier refused 2 2 MESH_DEVICE_HIER=1
hier silent 4 2 MESH_TIMEOUT=3

# coll ranks nodes: the conformance suite; prints how many calls took the path
conf() {
    out=$("$run" -n $2 --nodes $3 --timeout 600 "$b/tests/mp/conformance" -o $1 -a ipc-hier \
        -D -q -s 2>&1)
    rc=$?
    used=$(printf '%s\n' "$out" | sed -n 's/^USED //p')
    calls=$(printf '%s\n' "$out" | sed -n 's/^CALLS //p')
    printf 'conformance %-10s ranks=%d nodes=%d rc=%d by ipc-hier: %s of %s calls\n' $1 $2 $3 \
        $rc "$used" "$calls"
    [ $rc -eq 0 ] || { printf '%s\n' "$out" | head -30; status=1; }
}
for coll in allreduce allgather broadcast reduce_scatter; do
    conf $coll 6 2
    # the v-forms and pre-multiplied sums stage; the rest takes the path
    [ -n "$used" ] && [ "$used" != 0 ] || { echo "    expected calls by ipc-hier"; status=1; }
    if [ $coll = broadcast ] && [ "$used" != "$calls" ]; then
        echo "    expected every call"
        status=1
    fi
    conf $coll 3 2
    [ "$used" = 0 ] || { echo "    expected none by ipc-hier on unequal nodes"; status=1; }
done
exit $status
