#!/bin/bash
# Side-by-side numbers of mesh and MPI on 2 ranks, with the machine's own limits beside them:
#   (a) one node: mesh over shared memory, MPI with its default shared-memory path;
#   (b) two nodes: mesh between two simulated nodes (meshrun --nodes 2: network namespaces
#       joined by veth and a bridge when root), MPI over its tcp btl between the same kind of
#       namespaces (each MPI rank enters its node's namespace; without root, both on loopback);
#   memcpy bandwidth of one process, and iperf3 single-stream throughput between two
#   namespaces built exactly like meshrun's (root only), one way and both ways at once.
# For every op and size the table shows busbw of both and the ratio mesh/MPI (above 1: mesh
# is faster), with the lowest and highest ratio of a single round beside it, then the 8-byte
# all-reduce latency of both and their ratio (above 1: mesh is slower). mesh and MPI take
# turns, --rounds times, and every figure is the median over the rounds, so that a shared
# machine's drift hits both alike; iperf3 runs in each round of (b), after MPI. The last
# section sets mesh against the machine's limits: the largest one-node all-reduce against
# memcpy of the same size, and every two-node all-reduce and all-gather of 64 MiB and more (or
# the largest size) against iperf3. CSV files of every run stay in the output folder.
# With --peer-build DIR, the peer is not MPI but the mesh of another build tree (DIR's meshrun
# and mesh-bench, over the same transports): the cost of a change, measured in the same run.
set -u

usage() {
    cat <<EOF
usage: $0 [-o ops] [-b min] [-e max] [-f factor] [-n iters] [-w warmup] [-r rounds]
          [--out DIR] [--builddir DIR] [--peer-build DIR] [--skip-iperf]
  -o ops        comma-separated (default allreduce,reduce_scatter,allgather,alltoall,broadcast)
  -b/-e/-f      sizes as in mesh-bench (default 8 / 8m / 4)
  -n/-w         timed and warm-up iterations per size (default 20 / 5)
  -r rounds     runs of each side, taking turns; medians are shown (default 3)
  --out DIR     where the CSV files and logs go (default: a new folder in \$TMPDIR or /tmp)
  --builddir    build tree holding tools/meshrun and bench/ (default: this script's .. when
                built there, else the current folder)
  --peer-build  the peer is mesh built in this other tree (called "peer" in the tables), not MPI
EOF
}

ops=allreduce,reduce_scatter,allgather,alltoall,broadcast
minb=8 maxb=8m factor=4 iters=20 warmup=5 rounds=3 out="" skip_iperf=0
# a build in the source tree, else (sources and build apart) the folder it is run from
builddir=$(cd "$(dirname "$0")/.." && pwd)
[ -x "$builddir/tools/meshrun" ] || builddir=$(pwd)
. "$(dirname "$0")/compare_lib.sh"
peer_build=""
extra_arg() {
    [ "$1" = --peer-build ] || return 1
    peer_build=$2
}
parse_args "$@"

MESHRUN=$builddir/tools/meshrun
MESHBENCH=$builddir/bench/mesh-bench
MPIBENCH=$builddir/bench/mpi/mpi-bench
for f in "$MESHRUN" "$MESHBENCH"; do
    [ -x "$f" ] || { echo "compare.sh: $f not built (make first, or --builddir)" >&2; exit 2; }
done
[ -n "$out" ] || out=$(mktemp -d "${TMPDIR:-/tmp}/mesh-compare.XXXXXX")
mkdir -p "$out" || exit 2
have_mpi=1
PEER=MPI
if [ -n "$peer_build" ]; then
    PEER=peer
    for f in "$peer_build/tools/meshrun" "$peer_build/bench/mesh-bench"; do
        [ -x "$f" ] || { echo "compare.sh: $f not built" >&2; exit 2; }
    done
elif [ ! -x "$MPIBENCH" ] || ! command -v mpirun >/dev/null; then
    have_mpi=0
    echo "note: mpi-bench or mpirun missing (configure found no MPI): mesh numbers only"
fi
root=0
[ "$(id -u)" = 0 ] && root=1
mpirun_flags=(-np 2 --bind-to none)
[ $root = 1 ] && mpirun_flags+=(--allow-run-as-root --oversubscribe)
common=(-o "$ops" -b "$minb" -e "$maxb" -f "$factor" -n "$iters" -w "$warmup" -c 1)
lat=(-o allreduce -b 8 -e 8 -n 2000 -w 200 -c 1)
status=0
each_round=""

# latency MESH_CSV MPI_CSV: the 8-byte all-reduce time of both and the ratio
latency() {
    local m p
    m=$(awk -F, 'NR > 1 && $1 == "allreduce" && $4 == 8 && $11 == 0 { print $7 }' "$1")
    p=$(awk -F, 'NR > 1 && $1 == "allreduce" && $4 == 8 && $11 == 0 { print $7 }' \
        "${2:-/dev/null}" 2>/dev/null)
    if [ -n "$m" ] && [ -n "$p" ]; then
        awk -v m="$m" -v p="$p" -v P="$PEER" 'BEGIN {
            fmt = "  8-byte allreduce latency: mesh %.2f us, %s %.2f us, mesh/%s %.2f\n"
            printf fmt, m, P, p, P, (p > 0 ? m / p : 0) }'
    else
        echo "  8-byte allreduce latency: mesh ${m:-?} us, $PEER ${p:-?} us"
    fi
}

peers() { grep '^#   rank' "$1" | sed 's/^#/ /'; }

# report NAME: the peers mesh reached, then the table and the latency of the runs called NAME
report() {
    local name=$1
    [ -f "$out/mesh-$name.log" ] && peers "$out/mesh-$name.log"
    [ -f "$out/mesh-$name.csv" ] || return 0
    table "$name"
    [ -f "$out/mesh-$name-lat.csv" ] &&
        latency "$out/mesh-$name-lat.csv" "$([ -f "$out/mpi-$name-lat.csv" ] &&
            echo "$out/mpi-$name-lat.csv")"
    return 0
}

# rounds NAME MESH_CMD... -- MPI_CMD...: both sides take turns $rounds times, each round to
# $out/NAME-{mesh,mpi}.R.csv, then the medians to $out/mesh-NAME.csv and $out/mpi-NAME.csv;
# the command in $each_round, when set, runs after each round with the round's number
rounds() {
    local name=$1 r; shift
    local mesh=() mpi=()
    while [ "$1" != -- ]; do mesh+=("$1"); shift; done
    shift
    mpi=("$@")
    for r in $(seq "$rounds"); do
        run "mesh-$name.$r" "${mesh[@]}" --csv "$out/mesh-$name.$r.csv"
        [ $have_mpi = 1 ] && run "mpi-$name.$r" "${mpi[@]}" --csv "$out/mpi-$name.$r.csv"
        [ -z "$each_round" ] || "$each_round" "$r"
    done
    median "$out/mesh-$name.csv" $(ls "$out"/mesh-"$name".[0-9]*.csv 2>/dev/null)
    [ $have_mpi = 1 ] && median "$out/mpi-$name.csv" $(ls "$out"/mpi-"$name".[0-9]*.csv 2>/dev/null)
    cp "$out/mesh-$name.1.log" "$out/mesh-$name.log" 2>/dev/null
    return 0
}

echo "mesh vs $PEER${peer_build:+ ($peer_build)}, 2 ranks; sizes $minb..$maxb x$factor, $iters iterations (warm-up $warmup)"
echo "results and logs: $out"

# ---------------------------------------------------------------- (a) one node
echo
if [ -n "$peer_build" ]; then
    echo "== (a) one node: mesh (shared memory) vs the peer build ($peer_build)"
else
    echo "== (a) one node: mesh (shared memory) vs MPI (its default shared-memory btl)"
fi
mpi1=(mpirun "${mpirun_flags[@]}" "$MPIBENCH")
[ -z "$peer_build" ] || mpi1=("$peer_build/tools/meshrun" -n 2 "$peer_build/bench/mesh-bench")
rounds 1node "$MESHRUN" -n 2 "$MESHBENCH" "${common[@]}" -- "${mpi1[@]}" "${common[@]}"
rounds 1node-lat "$MESHRUN" -n 2 "$MESHBENCH" "${lat[@]}" -- "${mpi1[@]}" "${lat[@]}"
report 1node

# ---------------------------------------------------------------- (b) two nodes
echo
if [ $root = 1 ]; then
    echo "== (b) two simulated nodes: mesh between 2 network namespaces (veth + bridge) vs $PEER"
else
    echo "== (b) two simulated nodes: mesh between 2 node labels on loopback (not root: no"
    echo "   namespaces) vs $PEER"
fi
if [ -n "$peer_build" ]; then
    echo "   the peer build runs exactly as mesh does (meshrun --nodes 2)"
elif [ $root = 1 ]; then
    # MPI over the same simulated network: meshrun builds the two namespaces and runs mpirun in
    # node 0's; each MPI rank k enters node k's namespace before it starts, and talks TCP over
    # eth0 only (PMIx and the runtime too, since rank 1 cannot reach node 0's loopback)
    echo "   MPI runs in the same two namespaces (--mca pml ob1 --mca btl self,tcp"
    echo "   --mca btl_tcp_if_include eth0; rank k inside node k's namespace)"
    in_ns='[ "$MESH_RANK" = 0 ] || exit 0
        ns=$(ip netns identify $$)
        [ -n "$ns" ] || { echo "compare.sh: not inside a named namespace" >&2; exit 1; }
        export MESH_NS=${ns%-n0} PMIX_MCA_ptl_tcp_remote_connections=1 PMIX_MCA_ptl_tcp_if_include=eth0
        exec "$@"'
    enter='exec ip netns exec "$MESH_NS-n$OMPI_COMM_WORLD_RANK" "$@"'
    mpi2=("$MESHRUN" -n 2 --nodes 2 --netns on --timeout 3600 sh -c "$in_ns" sh
          mpirun "${mpirun_flags[@]}" -x MESH_NS --mca oob_tcp_if_include eth0 --mca pml ob1
          --mca btl self,tcp --mca btl_tcp_if_include eth0 sh -c "$enter" sh "$MPIBENCH")
else
    echo "   MPI runs with --mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include lo: TCP over"
    echo "   the loopback device (namespaces need root)"
    mpi2=(mpirun "${mpirun_flags[@]}" --mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include lo
          "$MPIBENCH")
fi
[ -z "$peer_build" ] ||
    mpi2=("$peer_build/tools/meshrun" -n 2 --nodes 2 "$peer_build/bench/mesh-bench")
iperf_check
[ $do_iperf = 1 ] && each_round=iperf_round
rounds 2node "$MESHRUN" -n 2 --nodes 2 "$MESHBENCH" "${common[@]}" -- "${mpi2[@]}" "${common[@]}"
each_round=""
rounds 2node-lat "$MESHRUN" -n 2 --nodes 2 "$MESHBENCH" "${lat[@]}" -- "${mpi2[@]}" "${lat[@]}"
report 2node

# ---------------------------------------------------------------- the machine's limits
echo
echo "== limits of this machine"
# the sizes of the tables, so that the largest all-reduce has a memcpy of its size
run memcpy "$MESHBENCH" --memcpy -b "$minb" -e "$maxb" -f "$factor" -n 10 -w 2 \
    --csv "$out/memcpy.csv"
if [ -f "$out/memcpy.csv" ]; then
    awk -F, 'NR > 1 { if ($9 + 0 > best) { best = $9; at = $4 } }
             END { printf "  memcpy, one process: %.2f GB/s at best (%d bytes)\n", best, at }' \
        "$out/memcpy.csv"
fi
oneway="" perdir=""
if [ $do_iperf = 0 ]; then
    echo "  iperf3: $iperf_note"
else
    iperf_medians
    oneway=$iperf_one perdir=$iperf_per
    if [ -n "$oneway" ]; then
        awk -v g="$oneway" -v r="$rounds" 'BEGIN { printf "  iperf3, one TCP stream between " \
            "two namespaces: %.2f Gbit/s = %.2f GB/s (median of %d, one per round of (b))\n",
            g, g / 8, r }'
    else
        echo "  iperf3: no result; see $out/iperf3.1.log"
        status=1
    fi
    if [ -n "$perdir" ]; then
        awk -v g="$perdir" 'BEGIN { printf "  iperf3 --bidir, one stream each way at once: " \
            "%.2f Gbit/s = %.2f GB/s per direction (median)\n", g, g / 8 }'
    else
        echo "  iperf3 --bidir: no result; see $out/iperf3_bidir.1.log"
    fi
fi
echo
echo "== mesh against these limits"
if [ -f "$out/mesh-1node.csv" ] && [ -f "$out/memcpy.csv" ]; then
    awk -F, '
        FNR == 1 { file++; next }
        file == 1 && $1 == "allreduce" && $11 == 0 && $4 + 0 >= big { big = $4; bw = $9 }
        file == 2 { mc[$4] = $9 }
        END {
            if (!big) exit
            if (mc[big] + 0 > 0)
                printf "  one node: allreduce of %d bytes at %.4f GB/s busbw = %.2f of memcpy " \
                    "of that size (%.2f GB/s)\n", big, bw, bw / mc[big], mc[big]
            else
                printf "  one node: allreduce of %d bytes at %.4f GB/s busbw (no memcpy of " \
                    "that size)\n", big, bw
        }' "$out/mesh-1node.csv" "$out/memcpy.csv"
fi
if [ -f "$out/mesh-2node.csv" ] && [ -n "$oneway" ]; then
    awk -F, -v one="$oneway" -v per="${perdir:-0}" '
        NR == 1 { next }
        ($1 == "allreduce" || $1 == "allgather") && $11 == 0 {
            k[n++] = $1 SUBSEP $4 SUBSEP $9; if ($4 + 0 > big) big = $4 + 0 }
        END {
            from = big < 67108864 ? big : 67108864
            for (i = 0; i < n; i++) {
                split(k[i], f, SUBSEP)
                if (f[2] + 0 < from) continue
                printf "  two nodes: %-9s %10d bytes at %.4f GB/s busbw = %.2f of iperf3 one " \
                    "way", f[1], f[2], f[3], f[3] / (one / 8)
                if (per > 0) printf ", %.2f of iperf3 --bidir per direction", f[3] / (per / 8)
                printf "\n"
            }
        }' "$out/mesh-2node.csv"
fi
exit $status
