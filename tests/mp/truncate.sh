#!/bin/sh
# Receives shorter than their messages (tests/mp/truncate.c) on every transport built and usable
# here: self (one rank), shm (two ranks of a node), and tcp, ucx, ofi and verbs between two
# simulated nodes. Each must fail the receive with MESH_ERR_TRUNCATED naming the sender and
# both sizes, write nothing outside the receive buffer and complete the send.
set -u
. "${top_srcdir:-.}/tests/mp/net_lib.sh"
prog="$b/tests/mp/truncate"
export MESH_TIMEOUT=${MESH_TIMEOUT:-30}
# every truncation is an error the library logs; the test checks the messages itself
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-warn}
status=0
one() {
    name=$1
    shift
    out=$("$run" "$@" 2>&1)
    rc=$?
    printf '%-6s rc=%d %s\n' "$name" $rc "$(printf '%s\n' "$out" | grep '^truncate:')"
    if [ $rc -ne 0 ]; then
        printf '%s\n' "$out" | grep -v ' mesh ERROR ' | head -20
        status=1
    fi
}
usable() { "$b/tools/mesh-info" -t 2>/dev/null | grep -q "^$1  *usable here"; }
MESH_TLS=self one self -n 1 --timeout 120 "$prog" --expect self
MESH_TLS=self,shm one shm -n 2 --timeout 120 "$prog" --expect shm
MESH_TLS=self,shm,tcp MESH_NET=tcp one tcp -n 2 --nodes 2 --timeout 120 "$prog" --expect tcp
if usable ucx; then
    MESH_TLS=self,shm,ucx UCX_TLS=${UCX_TLS:-tcp} one ucx -n 2 --nodes 2 --timeout 120 "$prog" \
        --expect ucx
else
    echo "ucx    not built or not usable here: skipped"
fi
if grep -q '^#define HAVE_OFI 1' "$b/config.h" 2>/dev/null && command -v fi_info >/dev/null &&
    fi_info -p tcp -t FI_EP_RDM >/dev/null 2>&1; then
    MESH_TLS=self,shm,ofi FI_PROVIDER=tcp one ofi -n 2 --nodes 2 --timeout 120 "$prog" --expect ofi
else
    echo "ofi    libfabric's tcp provider absent: skipped"
fi
if usable verbs; then
    MESH_TLS=self,shm,verbs one verbs -n 2 --nodes 2 --timeout 120 "$prog" --expect verbs
else
    echo "verbs  no active RDMA port: skipped"
fi
exit $status
