#!/bin/sh
# A rank killed with SIGKILL mid-collective over ucx (UCX over its tcp transport): every survivor
# reports MESH_ERR_PEER_FAILED naming it. Skips (77) without ucx.
set -e
. "${top_srcdir:-.}/tests/mp/net_lib.sh"
net_need ucx
export MESH_TIMEOUT=10
export UCX_TLS=${UCX_TLS:-tcp}
"$b/tests/mp/fault" 4 self,ucx
"$b/tests/mp/fault" 3 self,ucx
# each error mode explicitly (auto picks none on hosts without RDMA), after checking that the
# endpoints really use the mode asked for
for m in peer none; do
    want="$m error handling"
    [ $m = none ] && want="no peer error handling"
    MESH_UCX_ERR_MODE=$m MESH_TLS=self,ucx MESH_LOG_LEVEL=debug MESH_LOG_SUBSYS=ucx \
        "$b/tools/meshrun" -n 2 --timeout 60 "$b/bench/mesh-bench" -o allreduce -b 8 -e 8 -n 1 \
        -w 0 2>&1 | grep -q "bytes, $want" || {
        echo "MESH_UCX_ERR_MODE=$m: endpoints not set up with $want"
        exit 1
    }
done
MESH_UCX_ERR_MODE=peer "$b/tests/mp/fault" 4 self,ucx
MESH_UCX_ERR_MODE=none "$b/tests/mp/fault" 3 self,ucx
MESH_UCX_ERR_MODE=none MESH_TIMEOUT=2 "$b/tests/mp/fault" 3 self,ucx stop
