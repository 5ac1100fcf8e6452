#!/bin/sh
# NCCL's API on device buffers across simulated nodes: 2 nodes x 2 ranks under meshrun --nodes 2
# (network namespaces when root: the nodes reach each other over tcp only, and device data
# between them is staged through pinned host memory). Every collective with exact results,
# grouped send/recv around the ring and an uneven all-to-all by send/recv (both across the
# nodes), eight calls queued on one stream before it is synchronized, the stream held while a
# call is enqueued (tests/nccl/nccl_device.c --launched).
#
#   tests/nccl/nccl_device_nodes.sh          the emulated device (make check)
#   tests/nccl/nccl_device_nodes.sh cuda     GPU 0 through mesh's libnccl.so.2, every rank on it
#                                            (tests/gpu/device-check.sh); 77 without a GPU
#
# NCCL_NODES_WORLDS: the worlds as RANKSxNODES (default 4x2).
set -u
b=${top_builddir:-.}
mem=${1:-emu}
export MESH_TIMEOUT=${MESH_TIMEOUT:-60}
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
case $mem in
emu)
    prog="$b/tests/nccl/nccl_device_emu"
    export MESH_DEVICE_EMU=1 MESH_DEVICE_EMU_DEVICE=1
    export MESH_DEVICE_EMU_DELAY_US=${MESH_DEVICE_EMU_DELAY_US:-20}
    ;;
cuda)
    prog="$b/tests/gpu/nccl_cuda"
    unset MESH_DEVICE_EMU
    ;;
*)
    echo "usage: $0 [emu|cuda]" >&2
    exit 2
    ;;
esac
[ -x "$prog" ] || { echo "$prog is not built"; exit 77; }
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
status=0
for w in ${NCCL_NODES_WORLDS:-4x2}; do
    n=${w%x*} k=${w#*x}
    rm -f "$dir/nccl.id"
    t0=$(date +%s)
    "$b/tools/meshrun" -n "$n" --nodes "$k" --timeout 300 "$prog" --launched "$dir" \
        >"$dir/out" 2>&1
    rc=$?
    cat "$dir/out"
    # one line per rank, each naming its node: every node present
    ok=$(grep -c "^nccl_device ($mem): rank [0-9]* of $n on node[0-9]*: ok" "$dir/out")
    nodes=$(sed -n "s/^nccl_device ($mem): rank [0-9]* of $n on \(node[0-9]*\): ok.*/\1/p" \
        "$dir/out" | sort -u | wc -l | tr -d ' ')
    echo "nccl_device_nodes: $mem, $n ranks on $k nodes: rc $rc, $ok ranks ok on $nodes nodes" \
        "($(($(date +%s) - t0)) s)"
    case $rc in
    0) [ "$ok" = "$n" ] && [ "$nodes" = "$k" ] || status=1 ;;
    77) [ $status = 0 ] && status=77 ;;
    *) status=1 ;;
    esac
done
exit $status
