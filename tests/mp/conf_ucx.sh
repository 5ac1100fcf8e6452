#!/bin/sh
# Collectives over ucx between 2 simulated nodes (4 ranks; same-node peers use shm, the others
# ucx over its tcp transport): every algorithm of every collective with two small dtypes, then
# the ring all-reduce with large messages (UCX's rendezvous) in both error modes. Each run
# checks exact values and that the forced algorithm ran; MESH_TLS leaves no other way between
# the nodes. Skips (77) without ucx.
set -u
b=${top_builddir:-.}
run="$b/tools/meshrun"
prog="$b/tests/mp/conformance"
"$b/tools/mesh-info" -t 2>/dev/null | grep -q '^ucx  *usable here' || {
    echo "ucx not built or not usable here: skipped"
    exit 77
}
export MESH_TLS=self,shm,ucx
export UCX_TLS=${UCX_TLS:-tcp}
export MESH_TIMEOUT=${MESH_TIMEOUT:-60}
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
status=0
# one: COLLECTIVE ALGORITHM DTYPES
one() {
    out=$(MESH_TUNE="$1:$2" "$run" -n 4 --nodes 2 --timeout 120 \
        "$prog" -o "$1" -a "$2" -d "$3" 2>&1)
    rc=$?
    used=$(printf '%s\n' "$out" | awk '$1 == "USED" { print $2 }')
    printf 'ucx %-15s %-18s %-10s rc=%d used=%s\n' "$1" "$2" "$3" "$rc" "${used:-?}"
    if [ $rc -ne 0 ] || [ "${used:-0}" -eq 0 ]; then
        printf '%s\n' "$out" | head -30
        status=1
    fi
}
"$prog" --list >/dev/null || exit 1
for pair in $("$prog" --list | awk '{ print $1 ":" $2 }'); do
    one "${pair%%:*}" "${pair#*:}" int32,fp16
done
one allreduce ring int8
# the same with UCX's peer error handling, the default on RDMA hosts (rendezvous data then
# travels in active messages over tcp)
MESH_UCX_ERR_MODE=peer one allreduce ring int8
exit $status
