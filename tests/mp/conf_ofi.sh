#!/bin/sh
# Collective conformance over the ofi transport: 4 ranks on 2 simulated nodes, libfabric's tcp
# provider between the nodes and shm inside each, every algorithm of every collective forced in
# turn (each run checks every op and size with exact values; the data-moving collectives with
# every dtype, the reductions with one integer and one half-precision dtype, as over ucx). Fails
# if a run fails, if an algorithm was never used, or if the nodes did not talk over ofi. Skips
# (77) without libfabric or its tcp provider.
set -u
b=${top_builddir:-.}
run="$b/tools/meshrun"
prog="$b/tests/mp/conformance"
grep -q '^#define HAVE_OFI 1' "$b/config.h" 2>/dev/null || { echo "built without libfabric"; exit 77; }
command -v fi_info >/dev/null 2>&1 || { echo "fi_info not found"; exit 77; }
fi_info -p tcp -t FI_EP_RDM >/dev/null 2>&1 || { echo "libfabric provider tcp absent"; exit 77; }
export MESH_TLS=self,shm,ofi FI_PROVIDER=tcp
export MESH_TIMEOUT=${MESH_TIMEOUT:-60}
args="-n 4 --nodes 2 --timeout 300"

# every rank reaches the other node's two ranks over ofi
routes=$(MESH_LOG_LEVEL=debug MESH_LOG_SUBSYS=comm "$run" $args "$prog" -o barrier -q 2>&1)
n=$(printf '%s\n' "$routes" | grep -c 'over ofi')
if [ "$n" -ne 8 ]; then
    printf '%s\n' "$routes" | head -30
    echo "FAIL: $n routes over ofi, want 8"
    exit 1
fi

export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
status=0
for pair in $("$prog" --list | awk '{ print $1 ":" $2 }'); do
    coll=${pair%%:*} algo=${pair#*:}
    case $coll in
    allreduce | reduce | reduce_scatter) dt="-d int32,fp16" ;;
    *) dt="" ;;
    esac
    out=$(MESH_TUNE="$coll:$algo" "$run" $args "$prog" -o "$coll" -a "$algo" $dt 2>&1)
    rc=$?
    used=$(printf '%s\n' "$out" | awk '$1 == "USED" { print $2 }')
    printf 'ofi %-15s %-18s rc=%d used=%s\n' "$coll" "$algo" "$rc" "${used:-?}"
    if [ $rc -ne 0 ] || [ "${used:-0}" -eq 0 ]; then
        printf '%s\n' "$out" | head -30
        status=1
    fi
done
exit $status
