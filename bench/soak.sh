#!/bin/sh
# Soak: bench/soak (random collectives, sizes, datatypes and communicators, every result
# checked, memory sampled) run over several transports one after another, the time split
# evenly; prints one row per run and fails on a wrong result, an error or growth after warm-up.
#
#   bench/soak.sh [--minutes M] [--seed N] [--runs "name:ranks:nodes:env ..."]
#
# Default runs: shm (4 ranks, one node), tcp (2 ranks on 2 simulated nodes), tcp only
# (3 ranks, one node, MESH_TLS=self,tcp) and mixed (4 ranks on 2 nodes: shm inside, tcp
# between). The grid communicators (tp = 2) join where every node has an even rank count.
# Not part of make check: it takes --minutes (default 10).
set -u
b=${top_builddir:-$(dirname "$0")/..}
minutes=10
seed=${SOAK_SEED:-$(date +%s)}
runs="shm:4:1: tcp:2:2: tcponly:3:1:MESH_TLS=self,tcp mixed:4:2:"
. "$(dirname "$0")/long_opts.sh"
long_opts soak.sh 10 1 "minutes seed runs" "$@"
prog="$b/bench/soak"
[ -x "$prog" ] || { echo "soak.sh: build $prog first (make)" >&2; exit 1; }
nruns=$(echo $runs | wc -w)
per=$(awk -v m="$minutes" -v n="$nruns" 'BEGIN { printf "%.0f", m * 60 / n }')
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
export MESH_TIMEOUT=${MESH_TIMEOUT:-60}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
shm_before=$(ls /dev/shm | grep -c '^mesh-')
echo "soak: $nruns runs of ${per} s, seed $seed"
status=0
for r in $runs; do
    name=${r%%:*}; rest=${r#*:}
    n=${rest%%:*}; rest=${rest#*:}
    nodes=${rest%%:*}; envs=${rest#*:}
    echo "== $name: $n ranks on $nodes node(s) ${envs:+($envs)}"
    # shellcheck disable=SC2086
    env $envs "$b/tools/meshrun" -n "$n" --nodes "$nodes" --timeout $((per + 120)) \
        "$prog" --seconds "$per" --seed "$seed" >"$tmp/$name.out" 2>&1
    rc=$?
    grep -v '^SOAK' "$tmp/$name.out" | tail -n 20
    line=$(grep '^SOAK' "$tmp/$name.out" | tail -n 1)
    if [ $rc -ne 0 ] || [ -z "$line" ]; then
        line="SOAK verdict=FAILED(exit:$rc)"
        status=1
    fi
    case $line in *verdict=ok*) ;; *) status=1 ;; esac
    echo "$name $n $nodes $line" >>"$tmp/table"
done
shm_after=$(ls /dev/shm | grep -c '^mesh-')
echo
awk 'BEGIN { printf "%-8s %5s %5s %9s %12s %6s %9s %9s %5s %5s %4s %4s  %s\n", "run", "ranks",
             "nodes", "calls", "GiB", "wrong", "rss0 KiB", "rss1 KiB", "fds0", "fds1", "shm0",
             "shm1", "verdict" }
     { for (i = 4; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
       printf "%-8s %5s %5s %9s %12.2f %6s %9s %9s %5s %5s %4s %4s  %s\n", $1, $2, $3, v["calls"],
              v["bytes"] / 1073741824, v["wrong"], v["rss_warm_kb"], v["rss_end_kb"],
              v["fds_warm"], v["fds_end"], v["shm_warm"], v["shm_end"], v["verdict"]
       delete v }' "$tmp/table"
echo "(calls: collectives per rank, each checked; GiB: received by all ranks together;"
echo " rss, fds, shm: largest over the ranks, at the end of warm-up (0) and the largest of the"
echo " last quarter (1); shm counts the segments each process maps)"
echo "/dev/shm mesh-* entries: $shm_before before, $shm_after after (other jobs on this host count too)"
[ $status -eq 0 ] && echo "soak: PASS" || echo "soak: FAIL"
exit $status
