#!/bin/sh
# A hang with every peer alive (tests/mp/hang.c): the last of 3 ranks never posts; the others
# must fail with MESH_ERR_TIMEOUT between MESH_TIMEOUT and MESH_TIMEOUT + MESH_HANG_PROBE + 1 s, in a collective
# and in a receive, for MESH_TIMEOUT 1 and 2 s over shared memory, and 1 s over TCP.
set -u
b=${top_builddir:-.}
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
status=0
for run in self,shm:1 self,shm:2 self,tcp:1; do
    tls=${run%:*} t=${run#*:}
    out=$(MESH_TLS=$tls MESH_TIMEOUT=$t "$b/tools/meshrun" -n 3 --timeout 60 "$b/tests/mp/hang" 2>&1)
    rc=$?
    printf 'MESH_TLS=%s MESH_TIMEOUT=%s: rc=%d\n' $tls $t $rc
    printf '%s\n' "$out" | grep -v ' mesh ERROR ' | sed 's/^/  /'
    [ $rc -eq 0 ] || status=1
done
exit $status
