#!/bin/sh
# Conformance of one collective: every registered algorithm forced in turn through MESH_TUNE, on
# 1, 2, 3, 4, 5 and 8 ranks and 2 simulated nodes x 2 ranks (algorithms that read the node map
# also 2 x 3 and 3 ranks over 2 nodes; the direct all-reduce also 6 and 7), each run checking
# every dtype, op and size with exact values. Fails if an algorithm was never used.
# usage: conformance.sh COLLECTIVE
set -u
coll=$1
b=${top_builddir:-.}
run="$b/tools/meshrun"
prog="$b/tests/mp/conformance"
ranks=${MESH_TEST_RANKS:-"1 2 3 4 5 8"}
export MESH_TIMEOUT=${MESH_TIMEOUT:-60}
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
status=0
for algo in $("$prog" --list | awk -v c="$coll" '$1 == c { print $2 }'); do
    total=0
    layouts="$ranks nodes"
    # algorithms that read the node map also get 2 nodes x 3 ranks and unequal nodes (2 + 1)
    case $algo in hier*) layouts="$layouts 6x2 3x2" ;; esac
    # the direct all-reduce's messages and reduction order depend on every rank count
    case $coll:$algo in allreduce:direct) layouts="$layouts 6 7" ;; esac
    for n in $layouts; do
        case $n in
        nodes) args="-n 4 --nodes 2" ;;
        *x*) args="-n ${n%x*} --nodes ${n#*x}" ;;
        *) args="-n $n" ;;
        esac
        out=$(MESH_TUNE="$coll:$algo" "$run" $args --timeout 600 "$prog" -o "$coll" -a "$algo" 2>&1)
        rc=$?
        used=$(printf '%s\n' "$out" | awk '$1 == "USED" { print $2 }')
        printf '%s %-18s %-10s rc=%d used=%s\n' "$coll" "$algo" "$args" "$rc" "${used:-?}"
        if [ $rc -ne 0 ]; then
            printf '%s\n' "$out" | head -30
            status=1
        fi
        total=$((total + ${used:-0}))
    done
    if [ "$total" -eq 0 ]; then
        echo "FAIL: $coll algorithm $algo was never selected when forced"
        status=1
    fi
done
exit $status
