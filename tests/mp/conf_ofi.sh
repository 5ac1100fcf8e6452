#!/bin/sh
# Collective conformance over the ofi transport: 4 ranks on 2 simulated nodes, libfabric's tcp
# provider between the nodes and shm inside each, every algorithm of every collective forced in
# turn (each run checks every op and size with exact values; the data-moving collectives with
# every dtype, the reductions with one integer and one half-precision dtype, as over ucx). Fails
# if a run fails, if an algorithm was never used, or if the nodes did not talk over ofi. Skips
# (77) without libfabric or its tcp provider.
set -u
. "${top_srcdir:-.}/tests/mp/net_lib.sh"
grep -q '^#define HAVE_OFI 1' "$b/config.h" 2>/dev/null || { echo "built without libfabric"; exit 77; }
command -v fi_info >/dev/null 2>&1 || { echo "fi_info not found"; exit 77; }
fi_info -p tcp -t FI_EP_RDM >/dev/null 2>&1 || { echo "libfabric provider tcp absent"; exit 77; }
export MESH_TLS=self,shm,ofi FI_PROVIDER=tcp
export MESH_TIMEOUT=${MESH_TIMEOUT:-60}
net_routes ofi
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
net_each ofi
exit $status
