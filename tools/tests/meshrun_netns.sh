#!/bin/sh
# meshrun --nodes with network namespaces (root only): ranks of different nodes live in
# different namespaces, reach each other by address and not by loopback, and every namespace
# is gone afterwards on each exit path.
top_builddir=${top_builddir:-.}
MESHRUN="$top_builddir/tools/meshrun"
PROBE="$top_builddir/tools/tests/meshrun_probe"
if [ "$(id -u)" != 0 ]; then echo "skip: needs root"; exit 77; fi
if ! ip netns add "mesh-probe-$$" 2>/dev/null; then echo "skip: ip netns unusable"; exit 77; fi
ip netns del "mesh-probe-$$"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
check() {
    if [ "$2" = "$3" ]; then echo "ok: $1"; else echo "FAIL: $1: expected [$2] got [$3]"; fail=1; fi
}
# namespaces of run $1 (none may be left afterwards)
gone() { ip netns list | grep -c "^mesh-$1-" ; }
# waits until run $1 has its 3 namespaces (2 nodes and the bridge's) and its ranks started
wait_ns() {
    for i in $(seq 300); do
        [ "$(gone "$1")" = 3 ] && [ -f "$tmp/started.$1" ] && return 0
        sleep 0.1
    done
    return 1
}

# one address per node, nodes differ, MESH_ADDR points at node0's address
"$MESHRUN" -n 4 --nodes 2 --netns on sh -c \
    'a=$(ip -4 -o addr show dev eth0 | awk "{print \$4}")
     echo "$MESH_RANK $MESH_NODE_ID $a $MESH_ADDR"' \
    >"$tmp/out" &
mr=$!
wait $mr
check "netns run" 0 $?
sort "$tmp/out" >"$tmp/sorted"
cat "$tmp/sorted"
a0=$(awk '$1==0{print $3}' "$tmp/sorted"); a1=$(awk '$1==1{print $3}' "$tmp/sorted")
a2=$(awk '$1==2{print $3}' "$tmp/sorted"); a3=$(awk '$1==3{print $3}' "$tmp/sorted")
check "node0 ranks share an address" "$a0" "$a1"
check "node1 ranks share an address" "$a2" "$a3"
check "nodes differ" yes "$( [ -n "$a0" ] && [ "$a0" != "$a2" ] && echo yes)"
check "MESH_ADDR is node0's" yes "$(awk '$1==3{print $4}' "$tmp/sorted" | grep -q "^${a0%/24}:" &&
    echo yes)"
check "namespaces removed" 0 "$(gone $mr)"

# link MTU: 1500 by default, --mtu sets it, out-of-range values are refused
check "default MTU" 1500 "$("$MESHRUN" -n 2 --nodes 2 sh -c \
    '[ "$MESH_RANK" = 1 ] && ip -o link show dev eth0 | sed "s/.* mtu \([0-9]*\).*/\1/"; true')"
check "--mtu 9000" 9000 "$("$MESHRUN" -n 2 --nodes 2 --mtu 9000 sh -c \
    '[ "$MESH_RANK" = 1 ] && ip -o link show dev eth0 | sed "s/.* mtu \([0-9]*\).*/\1/"; true')"
"$MESHRUN" -n 2 --nodes 2 --mtu 100 true 2>/dev/null
check "--mtu 100 refused" 2 $?

# reachability by address, not through the other node's loopback (3 nodes, cyclic)
"$MESHRUN" -n 5 --nodes 3 --placement cyclic "$PROBE" &
mr=$!
wait $mr
check "probe across namespaces" 0 $?
check "namespaces removed after probe" 0 "$(gone $mr)"
# the probe notices when nodes share a loopback (node labels only)
"$MESHRUN" -n 2 --nodes 2 --netns off "$PROBE" >/dev/null 2>&1
check "probe fails without namespaces" yes "$( [ $? != 0 ] && echo yes)"

# failing rank: exit status, and cleanup
"$MESHRUN" -n 2 --nodes 2 sh -c '[ "$MESH_RANK" = 1 ] && exit 5; exec sleep 60' 2>/dev/null &
mr=$!
wait $mr
check "failing rank in netns" 5 $?
check "namespaces removed after failure" 0 "$(gone $mr)"

# timeout
"$MESHRUN" -n 2 --nodes 2 --timeout 1 sleep 60 2>/dev/null &
mr=$!
wait $mr
check "timeout in netns" 124 $?
check "namespaces removed after timeout" 0 "$(gone $mr)"

# SIGINT to meshrun
"$MESHRUN" -n 2 --nodes 2 sh -c 'touch "$0"; exec sleep 60' "$tmp/started.x" 2>/dev/null &
mr=$!
for i in $(seq 300); do [ -f "$tmp/started.x" ] && break; sleep 0.1; done
mv "$tmp/started.x" "$tmp/started.$mr" 2>/dev/null
wait_ns $mr
check "namespaces exist while running" 3 "$(gone $mr)"
kill -INT $mr
wait $mr
check "interrupted" 130 $?
check "namespaces removed after SIGINT" 0 "$(gone $mr)"

# a meshrun killed by SIGKILL leaves its namespaces; the next run removes them
"$MESHRUN" -n 2 --nodes 2 sh -c 'touch "$0"; exec sleep 60' "$tmp/started.y" 2>/dev/null &
mr=$!
for i in $(seq 300); do [ -f "$tmp/started.y" ] && break; sleep 0.1; done
mv "$tmp/started.y" "$tmp/started.$mr" 2>/dev/null
wait_ns $mr
check "namespaces exist before SIGKILL" 3 "$(gone $mr)"
kill -KILL $mr
wait $mr 2>/dev/null
"$MESHRUN" -n 2 --nodes 2 true
check "stale namespaces of a killed run removed" 0 "$(gone $mr)"

exit $fail
