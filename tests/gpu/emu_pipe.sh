#!/bin/sh
# Device calls between simulated nodes staged in pipelined chunks (collectives/device/dev_pipe.c),
# on the emulated device, 2 nodes x 2 ranks (tcp between them): all-reduce, reduce and broadcast
# with every dtype x op, in place and not, exact values and guard bytes (tests/mp/conformance -D),
#   - chunks of 1000 bytes: not a multiple of 8-byte elements, odd sizes split unevenly;
#   - chunks of 64k with the large sizes (65537 and 4 MiB + 3 elements: 5 to 65 chunks);
#   - chunks of 16k under MESH_DEVICE_STAGING_MAX=64k (fp32, large sizes included: slots of 32k
#     out of place, 2 chunks in flight, never more than 64k pinned);
# each with requests once. The communicator's figures must show the calls went by chunks, every
# byte through each stage, and stages busy at once; MESH_DEVICE_STAGING_REPORT prints them on
# every rank. Then a call of one chunk is staged whole, and MESH_DEVICE_STAGING_CHUNK=0 stages
# every call whole; stream ordering and a rank failing mid-call (tests/gpu/emu_stream); mesh-info
# -t names the paths.
set -u
b=${top_builddir:-.}
run="$b/tools/meshrun"
prog="$b/tests/mp/conformance"
export MESH_TIMEOUT=${MESH_TIMEOUT:-60}
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
# MESH_DEVICE_EMU=0 on a GPU machine runs the conformance part on the CUDA device instead
export MESH_DEVICE_EMU=${MESH_DEVICE_EMU:-1} MESH_DEVICE_EMU_DELAY_US=${MESH_DEVICE_EMU_DELAY_US:-20}
# on nodes of several ranks all-reduce and broadcast take the hierarchical path (dev_hier.c),
# which stages only each rank's share: this test is of the staged path, which serves them
# where nodes hold one rank each or MESH_DEVICE_HIER=0
export MESH_DEVICE_HIER=0
status=0

# field NAME: the number after NAME on the PIPELINED line
field() {
    printf '%s\n' "$pipe" | sed -n "s/.* $1 \([0-9]*\).*/\1/p"
}

# check LABEL CHUNK MAX ARGS...: runs conformance on 2 nodes x 2 ranks and checks the figures
check() {
    label=$1 chunk=$2 max=$3
    shift 3
    out=$(MESH_DEVICE_STAGING_CHUNK=$chunk MESH_DEVICE_STAGING_MAX=$max \
        MESH_DEVICE_STAGING_REPORT=1 "$run" -n 4 --nodes 2 --timeout 600 "$prog" -D -q "$@" 2>&1)
    rc=$?
    # no device (ranks that had not seen it yet may fail on the ones that left)
    printf '%s\n' "$out" | grep -m1 'needs a device' && exit 77
    pipe=$(printf '%s\n' "$out" | grep '^PIPELINED')
    calls=$(field calls) chunks=$(field chunks) in=$(field in) wire=$(field wire)
    outb=$(field out) overlap=$(field overlap_us) depth=$(field depth) peak=$(field peak)
    reports=$(printf '%s\n' "$out" | grep -c '^mesh: device staging, rank')
    printf 'pipelined %-28s rc=%d calls=%s chunks=%s in=%s wire=%s out=%s overlap_us=%s depth=%s peak=%s reports=%s\n' \
        "$label" "$rc" "$calls" "$chunks" "$in" "$wire" "$outb" "$overlap" "$depth" "$peak" \
        "$reports"
    ok=1
    [ $rc -eq 0 ] || ok=0
    # more chunks than calls, every byte copied in and over the wire
    [ -n "$calls" ] && [ "$calls" -gt 0 ] && [ "$chunks" -gt "$calls" ] || ok=0
    [ -n "$wire" ] && [ "$wire" -gt 0 ] && [ "$in" -ge "$wire" ] || ok=0
    [ -n "$overlap" ] && [ "$overlap" -gt 0 ] || ok=0
    [ "$reports" = 4 ] || ok=0
    if [ $ok -ne 1 ]; then
        printf '%s\n' "$out" | head -30
        status=1
    fi
}

for coll in allreduce reduce broadcast; do
    check "$coll chunk=1000" 1000 256m -o "$coll" -s
    check "$coll chunk=64k large" 64k 256m -o "$coll" -d fp32,bf16,int8
    check "$coll chunk=16k max=64k" 16k 64k -o "$coll" -d fp32 -R
done
# out of place 2 chunks of 2 x 16k fit 64k, in place 3 of 16k: never more pinned than 64k
peak=$(field peak)
[ -n "$peak" ] && [ "$peak" -le 65536 ] && [ "$depth" -ge 2 ] ||
    { echo "expected at most 64k staged, 2 or more chunks in flight: $peak bytes, $depth"; status=1; }

# one chunk or less, and MESH_DEVICE_STAGING_CHUNK=0: staged whole, still exact
for chunk in 64m 0; do
    out=$(MESH_DEVICE_STAGING_CHUNK=$chunk "$run" -n 4 --nodes 2 --timeout 600 "$prog" -D -q \
        -o allreduce -s 2>&1)
    rc=$?
    pipe=$(printf '%s\n' "$out" | grep '^PIPELINED')
    printf 'whole chunk=%s rc=%d calls=%s\n' "$chunk" "$rc" "$(field calls)"
    if [ $rc -ne 0 ] || [ "$(field calls)" != 0 ]; then
        printf '%s\n' "$out" | head -30
        status=1
    fi
done
# stream ordering of pipelined calls (tests/gpu/emu_stream nodes: a call returns before its work
# ran, the stream's later work sees its results, a request completes only when they are back),
# then a rank leaving in the middle of one: every survivor's request fails naming it, its stream
# is released
modes="nodes pipefail"
[ "$MESH_DEVICE_EMU" = 1 ] || modes= # emu_stream takes emulated memory
for mode in $modes; do
    out=$(MESH_DEVICE_STAGING_CHUNK=64k MESH_TIMEOUT=20 "$run" -n 4 --nodes 2 --timeout 300 \
        "$b/tests/gpu/emu_stream" $mode 2>&1)
    rc=$?
    printf 'emu_stream %s chunk=64k rc=%d\n' "$mode" "$rc"
    if [ $rc -ne 0 ] || ! printf '%s\n' "$out" | grep -q "^emu_stream $mode ranks=4: ok"; then
        printf '%s\n' "$out" | head -30
        status=1
    fi
done

# mesh-info -t names each pair's path: chunked staging between nodes, and why not GPUDirect RDMA
info=$(MESH_DEVICE_STAGING_CHUNK=1m "$b/tools/mesh-info" -t 2>&1)
printf '%s\n' "$info" | grep -q '^  other nodes : staged through pinned host memory; all-reduce' &&
    printf '%s\n' "$info" | grep -q 'in chunks of 1048576 bytes (MESH_DEVICE_STAGING_CHUNK)' &&
    printf '%s\n' "$info" | grep -q '^  same node   : ipc' &&
    printf '%s\n' "$info" | grep -q '^  GPUDirect   : not used: [a-z]' ||
    { printf '%s\n' "$info" | tail -8; echo "mesh-info -t: expected the device paths"; status=1; }
info=$(MESH_DEVICE_STAGING_CHUNK=0 MESH_DEVICE_IPC=0 "$b/tools/mesh-info" -t 2>&1)
printf '%s\n' "$info" | grep -q '^  other nodes : staged whole' &&
    printf '%s\n' "$info" | grep -q '^  same node   : staged' ||
    { printf '%s\n' "$info" | tail -8; echo "mesh-info -t: expected staging whole"; status=1; }
echo "mesh-info -t: device paths named"
exit $status
