#!/bin/sh
# Replayed schedules: every algorithm of every collective forced in turn, each call made three
# times on the same buffers with new data each time, so that the second and third calls run the
# schedule built for the first (MESH_REPLAY). 3 ranks on one node, and 4 ranks on 2 simulated
# nodes for the algorithms that read the node map. Exact values every time; fails if a run
# fails, if an algorithm was never used, or if no call was replayed.
set -u
b=${top_builddir:-.}
run="$b/tools/meshrun"
prog="$b/tests/mp/conformance"
export MESH_TIMEOUT=${MESH_TIMEOUT:-60}
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
unset MESH_REPLAY
status=0
for pair in $("$prog" --list | awk '{ print $1 ":" $2 }'); do
    coll=${pair%%:*} algo=${pair#*:}
    case $algo in hier*) args="-n 4 --nodes 2" ;; *) args="-n 3" ;; esac
    out=$(MESH_TUNE="$coll:$algo" "$run" $args --timeout 300 "$prog" -o "$coll" -a "$algo" \
        -r 3 -d int32,fp16,fp32 2>&1)
    rc=$?
    used=$(printf '%s\n' "$out" | awk '$1 == "USED" { print $2 }')
    replays=$(printf '%s\n' "$out" | awk '$1 == "REPLAYS" { print $2 }')
    printf 'replay %-15s %-18s %-16s rc=%d used=%s replays=%s\n' "$coll" "$algo" "$args" "$rc" \
        "${used:-?}" "${replays:-?}"
    if [ $rc -ne 0 ] || [ "${used:-0}" -eq 0 ] || [ "${replays:-0}" -eq 0 ]; then
        printf '%s\n' "$out" | head -30
        status=1
    fi
done
exit $status
