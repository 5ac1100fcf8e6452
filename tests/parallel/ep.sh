#!/bin/sh
# Expert dispatch and combine (tests/parallel/ep_test.c) with the world as the ep group on 1, 2
# and 4 ranks, and on 4 ranks over 2 simulated nodes; MESH_TEST_RANKS adds sizes (E scales to
# a multiple of the size).
set -u
b=${top_builddir:-.}
export MESH_TIMEOUT=${MESH_TIMEOUT:-60}
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
prog="$b/tests/parallel/ep_test"
status=0
run() {
    desc="$*"
    if out=$("$b/tools/meshrun" --timeout 120 "$@" "$prog" 2>&1); then
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
exit $status
