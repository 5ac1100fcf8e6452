#!/bin/sh
# Expert dispatch and combine (tests/parallel/ep_test.c) with the world as the ep group on 1, 2
# and 4 ranks, and on 4 ranks over 2 simulated nodes; two ep=2 groups of an ep x dp grid side by
# side. Across nodes each with the path chosen automatically (the default), and forced flat and
# hierarchical, also on nodes of unequal size (3 ranks on 2 nodes), on one node and in two ep
# groups side by side that each span 2 nodes (4 ranks on 4 nodes); every run also checks that
# tokens choosing several experts of another node cross once on the hierarchical path, with the
# flat path's results. MESH_TEST_RANKS adds sizes (E scales to a multiple of the size).
set -u
b=${top_builddir:-.}
export MESH_TIMEOUT=${MESH_TIMEOUT:-60}
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
prog="$b/tests/parallel/ep_test"
status=0
# run MESHRUN_ARGS... [-- TEST_ARGS...]
run() {
    desc="$*"
    margs=
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        margs="$margs $1"
        shift
    done
    [ $# -gt 0 ] && shift
    # shellcheck disable=SC2086
    if out=$("$b/tools/meshrun" --timeout 120 $margs "$prog" "$@" 2>&1); then
        echo "ok: $desc"
    else
        echo "FAIL: $desc"
        printf '%s\n' "$out" | head -40
        status=1
    fi
}
for n in $(echo 1 2 4 ${MESH_TEST_RANKS:-} | tr ' ' '\n' | sort -nu); do
    run -n "$n"
done
run -n 4 --nodes 2
run -n 2 --nodes 2
run -n 4 -- --ep 2
run -n 4 --nodes 2 -- --ep 2
run -n 4 --nodes 2 -- --path hier
run -n 4 --nodes 2 -- --path flat
run -n 3 --nodes 2 -- --path hier
run -n 4 -- --path hier
run -n 4 --nodes 4 -- --ep 2 --path hier
exit $status
