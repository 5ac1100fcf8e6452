#!/bin/sh
# The 5D mesh grid on 2 simulated nodes x 4 ranks: tp=4 inside a node over shm and dp across
# nodes over tcp; with a round-robin placement the same grid fails naming tp, and fits once
# renumbered node by node; then three and four non-trivial axes and a folded expert grid.
set -u
b=${top_builddir:-.}
export MESH_TIMEOUT=${MESH_TIMEOUT:-60}
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
prog="$b/tests/mp/grid_test"
status=0
run() {
    desc=$1
    shift
    if out=$("$b/tools/meshrun" -n 8 --nodes 2 --timeout 120 "$@" 2>&1); then
        echo "ok: $desc"
    else
        echo "FAIL: $desc"
        printf '%s\n' "$out" | head -40
        status=1
    fi
}
run "tp=4 in a node, dp across nodes" \
    "$prog" --sizes 4,1,1,2,1 --cross dp
run "cyclic placement without renumbering fails naming tp" --placement cyclic \
    "$prog" --sizes 4,1,1,2,1 --expect-fail "tp=4 does not fit in a node: nodes have 4,4 ranks"
run "cyclic placement renumbered node by node" --placement cyclic \
    "$prog" --sizes 4,1,1,2,1 --reorder --expect-reordered --cross dp
run "tp-pp-dp with tp=pp=dp=2" \
    "$prog" --sizes 2,1,1,2,2 --order tp-pp-dp --cross dp
run "tp=2 cp=2 ep=2 intra-node, folded experts with expert_tp=1, cyclic renumbered" \
    --placement cyclic "$prog" --sizes 2,2,2,1,1 --order tp-cp-ep-dp-pp --expert-tp 1 \
    --intra cp,ep --reorder --expect-reordered --cross edp
exit $status
