#!/bin/sh
# Collectives over ucx between 2 simulated nodes (4 ranks; same-node peers use shm, the others
# ucx over its tcp transport): every algorithm of every collective with two small dtypes, then
# the ring all-reduce with large messages (UCX's rendezvous) in both error modes. Each run
# checks exact values and that the forced algorithm ran; MESH_TLS leaves no other way between
# the nodes. Skips (77) without ucx.
set -u
. "${top_srcdir:-.}/tests/mp/net_lib.sh"
net_need ucx
export MESH_TLS=self,shm,ucx
export UCX_TLS=${UCX_TLS:-tcp}
export MESH_TIMEOUT=${MESH_TIMEOUT:-60}
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
net_each ucx -d int32,fp16
net_one ucx allreduce ring -d int8
# the same with UCX's peer error handling, the default on RDMA hosts (rendezvous data then
# travels in active messages over tcp)
MESH_UCX_ERR_MODE=peer net_one ucx allreduce ring -d int8
exit $status
