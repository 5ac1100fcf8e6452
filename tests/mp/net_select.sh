#!/bin/sh
# Network transport selection on 2 simulated nodes x 2 ranks: MESH_NET=verbs,tcp falls back to
# tcp with a warning naming verbs and why (unless this machine has an active RDMA port, when
# verbs must be chosen, by that order and by the default one), MESH_NET=tcp picks tcp without a
# word about verbs, and an unknown name in MESH_NET is an error naming it.
set -e
b=${top_builddir:-.}
export MESH_TIMEOUT=${MESH_TIMEOUT:-60}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail() { echo "net_select.sh: $*" >&2; cat "$out" >&2; exit 1; }
run() { "$b/tools/meshrun" -n 4 --nodes 2 --timeout 120 "$b/tests/mp/net_select" "$@" >"$out" 2>&1; }

"$b/tools/mesh-info" -t >"$out" 2>&1 || fail "mesh-info -t"
grep -q '^tcp *usable here' "$out" || fail "mesh-info -t: tcp"
if grep -q '^verbs ' "$out"; then
    grep -q '^verbs *usable here\|^verbs *not usable here: [a-z]' "$out" || fail "mesh-info -t: verbs"
    grep -q 'scope net, .*priority 40' "$out" || fail "mesh-info -t: verbs priority"
fi
if grep -q '^verbs *usable here' "$out"; then
    MESH_NET=verbs,tcp MESH_LOG_LEVEL=info run --expect verbs || fail "verbs,tcp with a device"
    grep -q 'net: verbs' "$out" || fail "no info line naming verbs"
    # the default order too: an RDMA port never gives way to tcp
    (unset MESH_NET; MESH_LOG_LEVEL=info run --expect verbs) || fail "default MESH_NET with a device"
else
    MESH_NET=verbs,tcp MESH_LOG_LEVEL=info run --expect tcp || fail "verbs,tcp did not fall back"
    # every rank warns (it decided alone); the first rank of each node logs the choice
    [ "$(grep -c 'WARN .*MESH_NET: skipping verbs: [a-z]' "$out")" -eq 4 ] ||
        fail "want one warning naming verbs per rank"
    [ "$(grep -c 'INFO .*net: tcp (verbs: [a-z]' "$out")" -eq 2 ] ||
        fail "want one info line per node: net: tcp (verbs: why)"
fi

MESH_NET=tcp MESH_LOG_LEVEL=info run --expect tcp || fail "MESH_NET=tcp"
grep -q 'verbs' "$out" && fail "MESH_NET=tcp mentions verbs"
[ "$(grep -cE 'INFO .*net: tcp \([a-z_]+\.c:[0-9]+\)$' "$out")" -eq 2 ] || fail "want 'net: tcp' once per node"

MESH_NET=verbs,nosuchnet,tcp MESH_LOG_LEVEL=error run --fail "'nosuchnet'" || fail "unknown name"
[ "$(grep -c "init refused: .*unknown transport 'nosuchnet'" "$out")" -eq 4 ] ||
    fail "every rank must refuse naming nosuchnet"

# MESH_TLS still limits what is considered: without tcp there is no way between the nodes
MESH_TLS=self,shm MESH_NET=tcp MESH_LOG_LEVEL=error run --expect tcp && fail "MESH_TLS ignored"
grep -q 'no transport reaches rank' "$out" || fail "want the no-transport error"
echo "net_select.sh: ok"
