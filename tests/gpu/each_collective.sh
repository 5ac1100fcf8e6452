#!/bin/sh
# Runs a meshrun command once for every collective:
#
#   tests/gpu/each_collective.sh -n K [--nodes M] PROGRAM ARGS...
#
# runs tools/meshrun -n K [--nodes M] --timeout T PROGRAM -o COLL ARGS for each COLL of
# MESH_TEST_COLLS (default: every collective, the v-collectives run with theirs), with M
# simulated nodes (network namespaces when root; default 1), T = MESH_TEST_RUN_TIMEOUT seconds
# (default 120) per run. One line per run; exits 0 when every run passed, 77 when every run
# skipped (no device), else 1. The GPU machine's check (tests/gpu/device-check.sh) runs the
# conformance suite on device buffers through it: tests/mp/conformance -D.
set -u
b=${top_builddir:-.}
if [ $# -lt 3 ] || [ "$1" != -n ]; then
    echo "usage: $0 -n K [--nodes M] PROGRAM ARGS..." >&2
    exit 2
fi
n=$2
shift 2
nodes=1
if [ "$1" = --nodes ] && [ $# -ge 3 ]; then
    nodes=$2
    shift 2
fi
prog=$1
shift
export MESH_TIMEOUT=${MESH_TIMEOUT:-60}
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
colls=${MESH_TEST_COLLS:-"allreduce reduce broadcast reduce_scatter allgather alltoall gather scatter"}
lim=${MESH_TEST_RUN_TIMEOUT:-120}
pass=0 skip=0 fail=0
for coll in $colls; do
    t0=$(date +%s)
    out=$("$b/tools/meshrun" -n "$n" --nodes "$nodes" --timeout "$lim" "$prog" -o "$coll" "$@" 2>&1)
    rc=$?
    printf '%-15s ranks=%d nodes=%d %s rc=%d (%ds)\n' "$coll" "$n" "$nodes" "$*" "$rc" \
        $(($(date +%s) - t0))
    case $rc in
    0) pass=$((pass + 1)) ;;
    77) skip=$((skip + 1)); printf '%s\n' "$out" | tail -3 ;;
    *) fail=$((fail + 1)); printf '%s\n' "$out" | head -30 ;;
    esac
done
echo "each_collective: $pass passed, $skip skipped, $fail failed"
[ $fail -gt 0 ] && exit 1
[ $skip -gt 0 ] && [ $pass -gt 0 ] && exit 1 # a device for some runs only
[ $pass -eq 0 ] && [ $skip -gt 0 ] && exit 77
exit 0
