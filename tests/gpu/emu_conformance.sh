#!/bin/sh
# Every collective on emulated device buffers, ordered on a stream whose operations each run
# late (MESH_DEVICE_EMU_DELAY_US): every dtype x op x in place or not, exact values, guard bytes
# (tests/mp/conformance -D), on 2, 3, 4 and 8 ranks; calls with requests on 3 and 8 ranks, the
# large sizes on 2 ranks. The v-collectives run with their collective. All-gather, broadcast,
# all-reduce, reduce-scatter and all-to-all run by device copies between IPC mappings
# (collectives/device/dev_ipc.h): the calls that took that path (all of them but the
# pre-multiplied sums and all-to-all in place, which stage) are counted twice, by the algorithm each call reports and by
# the communicator's counter (not with MESH_DEVICE_IPC=0, which stages them). Then every
# collective on 2 nodes x 2 ranks (tcp between them), its device data staged through pinned
# host memory, with requests for all-reduce and all-to-all.
set -u
b=${top_builddir:-.}
run="$b/tools/meshrun"
prog="$b/tests/mp/conformance"
export MESH_TIMEOUT=${MESH_TIMEOUT:-60}
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
export MESH_DEVICE_EMU=1 MESH_DEVICE_EMU_DELAY_US=${MESH_DEVICE_EMU_DELAY_US:-20}
colls=${MESH_TEST_COLLS:-"allreduce reduce broadcast reduce_scatter allgather alltoall gather scatter"}
ranks=${MESH_TEST_RANKS:-"2 3 4 8"}
status=0
for coll in $colls; do
    for n in $ranks; do
        args="-D -q"
        case $n in 2) ;; *) args="$args -s" ;; esac
        case $n in 3 | 8) args="$args -R" ;; esac
        ipc=
        case $coll in allgather | broadcast | allreduce | reduce_scatter | alltoall) ipc="-a ipc" ;; esac
        [ "${MESH_DEVICE_IPC:-1}" = 0 ] && ipc= # staged on purpose
        [ "$n" -ge 2 ] || ipc= # one rank has no peer to map: its calls run locally
        out=$("$run" -n $n --timeout 600 "$prog" -o "$coll" $args $ipc 2>&1)
        rc=$?
        printf 'device %-15s ranks=%d %-10s rc=%d\n' "$coll" "$n" "$args" "$rc"
        if [ $rc -eq 0 ] && [ -n "$ipc" ]; then
            used=$(printf '%s\n' "$out" | sed -n 's/^USED //p')
            calls=$(printf '%s\n' "$out" | sed -n 's/^CALLS //p')
            byipc=$(printf '%s\n' "$out" | sed -n 's/^IPC calls \([0-9]*\).*/\1/p')
            printf '    by ipc: %s of %s calls (%s counted)\n' "$used" "$calls" "$byipc"
            [ -n "$used" ] && [ "$used" != 0 ] && [ "$used" = "$byipc" ] || rc=1
            # pre-multiplied sums, and all-to-all in place, stage
            case $coll in allreduce | reduce_scatter | alltoall) ;; *) [ "$used" = "$calls" ] || rc=1 ;; esac
            [ $rc -eq 0 ] || echo "    expected the calls by ipc, counted alike"
        fi
        if [ $rc -ne 0 ]; then
            printf '%s\n' "$out" | head -30
            status=1
        fi
    done
done
for coll in $colls; do
    args="-D -q -s"
    case $coll in allreduce | alltoall) args="$args -R" ;; esac
    out=$("$run" -n 4 --nodes 2 --timeout 600 "$prog" -o "$coll" $args 2>&1)
    rc=$?
    printf 'device %-15s ranks=4 nodes=2 %-10s rc=%d\n' "$coll" "$args" "$rc"
    if [ $rc -ne 0 ]; then
        printf '%s\n' "$out" | head -30
        status=1
    fi
done
exit $status
