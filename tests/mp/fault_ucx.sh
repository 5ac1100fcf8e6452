#!/bin/sh
# A rank killed with SIGKILL mid-collective over ucx (UCX over its tcp transport): every survivor
# reports MESH_ERR_PEER_FAILED naming it. Skips (77) without ucx.
set -e
b=${top_builddir:-.}
"$b/tools/mesh-info" -t 2>/dev/null | grep -q '^ucx  *usable here' || {
    echo "ucx not built or not usable here: skipped"
    exit 77
}
export MESH_TIMEOUT=10
export UCX_TLS=${UCX_TLS:-tcp}
"$b/tests/mp/fault" 4 self,ucx
"$b/tests/mp/fault" 3 self,ucx
