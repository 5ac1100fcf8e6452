#!/bin/sh
# meshrun without namespaces: environment, placement, failures, signals, timeout, output tags.
top_builddir=${top_builddir:-.}
MESHRUN="$top_builddir/tools/meshrun"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # name expected actual
    if [ "$2" = "$3" ]; then echo "ok: $1"; else echo "FAIL: $1: expected [$2] got [$3]"; fail=1; fi
}

# environment of each rank, block placement of 5 ranks on 2 nodes (3 + 2)
"$MESHRUN" -n 5 --nodes 2 --netns off sh -c \
    'echo "$MESH_RANK $MESH_SIZE $MESH_NODE_ID $MESH_LOCAL_RANK $MESH_LOCAL_SIZE"' |
    sort >"$tmp/env"
check "block env" "0 5 node0 0 3
1 5 node0 1 3
2 5 node0 2 3
3 5 node1 0 2
4 5 node1 1 2" "$(cat "$tmp/env")"

"$MESHRUN" -n 5 --nodes 2 --placement cyclic --netns off sh -c \
    'echo "$MESH_RANK $MESH_NODE_ID $MESH_LOCAL_RANK $MESH_LOCAL_SIZE"' | sort >"$tmp/env"
check "cyclic env" "0 node0 0 3
1 node1 0 2
2 node0 1 3
3 node1 1 2
4 node0 2 3" "$(cat "$tmp/env")"

# every rank sees the same address and secret; address on loopback, port in 20000-60000
"$MESHRUN" -n 3 --netns off sh -c 'echo "$MESH_ADDR $MESH_SECRET"' | sort -u >"$tmp/addr"
check "one address and secret" 1 "$(wc -l <"$tmp/addr" | tr -d ' ')"
port=$(sed -n 's/^127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$tmp/addr")
check "address on loopback, port in range" yes \
    "$( [ -n "$port" ] && [ "$port" -ge 20000 ] && [ "$port" -le 60000 ] && echo yes)"
check "secret is 64 hex digits" yes \
    "$(grep -Eq ' [0-9a-f]{64}$' "$tmp/addr" && echo yes)"
"$MESHRUN" -n 1 sh -c 'echo "$MESH_SECRET"' >"$tmp/s1"
"$MESHRUN" -n 1 sh -c 'echo "$MESH_SECRET"' >"$tmp/s2"
check "secret differs between runs" yes "$(cmp -s "$tmp/s1" "$tmp/s2" || echo yes)"

# a failing rank: meshrun exits with its status and the others are killed quickly
start=$(date +%s)
"$MESHRUN" -n 3 sh -c 'echo $$ >"$0/pid.$MESH_RANK"; [ "$MESH_RANK" = 1 ] && exit 7; exec sleep 60' \
    "$tmp" 2>"$tmp/err"
check "failing rank status" 7 $?
check "failing rank named" yes "$(grep -q 'rank 1 .*exited with status 7' "$tmp/err" && echo yes)"
check "others killed promptly" yes "$( [ $(( $(date +%s) - start )) -lt 20 ] && echo yes)"
alive=0
for f in "$tmp"/pid.*; do kill -0 "$(cat "$f")" 2>/dev/null && alive=1; done
check "no rank left running" 0 $alive

# a rank killed by a signal: 128 + signal
"$MESHRUN" -n 2 sh -c '[ "$MESH_RANK" = 0 ] && kill -SEGV $$; exec sleep 60' 2>"$tmp/err"
check "signal status" 139 $?
check "signal named" yes "$(grep -q 'rank 0 .*killed by signal 11' "$tmp/err" && echo yes)"

# a rank that ignores SIGTERM is killed after the grace period
start=$(date +%s)
"$MESHRUN" -n 2 sh -c '[ "$MESH_RANK" = 0 ] && exit 3; trap "" TERM; while :; do sleep 1; done' \
    2>"$tmp/err"
check "SIGKILL after grace" 3 $?
check "SIGKILL within bounds" yes "$( [ $(( $(date +%s) - start )) -lt 20 ] && echo yes)"

# --timeout
start=$(date +%s)
"$MESHRUN" -n 2 --timeout 1 sleep 60 2>"$tmp/err"
check "timeout status" 124 $?
check "timeout within bounds" yes "$( [ $(( $(date +%s) - start )) -lt 10 ] && echo yes)"

# SIGTERM to meshrun reaches the ranks (once both have their handler)
"$MESHRUN" -n 2 sh -c 'trap "echo got-term; exit 0" TERM; touch "$0/ready.$MESH_RANK"
    sleep 60 & wait' "$tmp" >"$tmp/out" 2>&1 &
mr=$!
for i in $(seq 200); do [ -f "$tmp/ready.0" ] && [ -f "$tmp/ready.1" ] && break; sleep 0.1; done
kill -TERM $mr
wait $mr
check "forwarded SIGTERM status" 143 $?
check "forwarded SIGTERM seen by ranks" 2 "$(grep -c got-term "$tmp/out")"

# --tag-output
"$MESHRUN" -n 2 --tag-output sh -c 'echo "hello $MESH_RANK"; printf "tail"' | sort >"$tmp/out"
check "tag output" "[0] hello 0
[0] tail
[1] hello 1
[1] tail" "$(cat "$tmp/out")"

# usage errors
"$MESHRUN" true 2>/dev/null
check "missing -n" 2 $?
"$MESHRUN" -n 2 --nodes 3 true 2>/dev/null
check "more nodes than ranks" 2 $?
"$MESHRUN" -n 2 --placement diagonal true 2>/dev/null
check "bad placement" 2 $?
"$MESHRUN" -n 1 /nonexistent/program 2>/dev/null
check "missing program" 127 $?
"$MESHRUN" --help | grep -q '^usage: meshrun'
check "help" 0 $?

exit $fail
