#!/bin/sh
# Collective conformance over the verbs transport: 4 ranks on 2 simulated nodes, verbs between
# the nodes and shm inside each, every algorithm of every collective forced in turn with exact
# values (the reductions with one integer and one half-precision dtype; every run includes
# messages of 4 MiB, which go by rendezvous and RDMA read). Fails if a run fails, if an
# algorithm was never used, or if the nodes did not talk over verbs. Skips (77) without an
# active RDMA port; tests/rdma/softroce.sh runs it on a software RoCE device.
set -u
. "${top_srcdir:-.}/tests/mp/net_lib.sh"
net_need verbs
export MESH_TLS=self,shm,verbs
export MESH_TIMEOUT=${MESH_TIMEOUT:-60}
net_routes verbs
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
net_each verbs
exit $status
