#!/bin/sh
# A rank killed with SIGKILL mid-collective over the verbs transport: every survivor reports it,
# naming the dead rank, within MESH_TIMEOUT. Skips (77) without an active RDMA port;
# tests/rdma/softroce.sh runs it on a software RoCE device.
set -e
. "${top_srcdir:-.}/tests/mp/net_lib.sh"
net_need verbs
export MESH_TIMEOUT=10
# a dead peer's queue pair stops answering the keepalive probe: report it after 8 tries of
# 67 ms rather than of 1 s
export MESH_IB_TIMEOUT=${MESH_IB_TIMEOUT:-14}
"$b/tests/mp/fault" 4 self,verbs
"$b/tests/mp/fault" 3 self,verbs
