#!/bin/bash
# mesh and MPI side by side on one node when the cores are busy: all-reduce on 2 ranks with the
# machine quiet, beside one and two busy processes (sh -c 'while :; do :; done'), and with 4 and
# 8 ranks on 2 cores (MPI with --oversubscribe). Every scenario runs on the same 2 CPUs (taskset),
# busy processes included, so that it means the same on a larger machine. mesh and MPI take
# turns, --rounds times; the table shows the median time per call of each, their ratio (mesh
# over MPI: above 1, mesh is slower) and the lowest and highest ratio of a single round. Then the
# CPU time of ranks that wait a second for a rank that sends nothing (mesh-bench --idle). Each
# size runs for at least --min-time seconds (0.05 by default; both benches take more than -n
# iterations where these are shorter), so that a busy process's time slice of a few ms weighs
# the same in every round instead of doubling one round's short average.
# With --peer-build DIR the peer is the mesh of another build tree (an A/B of a change).
# Not a timed test: the default run takes a few minutes.
set -u

usage() {
    cat <<EOF
usage: $0 [-b min] [-e max] [-f factor] [-n iters] [-w warmup] [-r rounds] [--out DIR]
          [--builddir DIR] [--peer-build DIR] [--scenarios LIST] [--idle S] [--min-time S]
  -b/-e/-f      all-reduce sizes as in mesh-bench (default 8 / 1m / 2)
  -n/-w         timed and warm-up iterations per size (default 20 / 5)
  -r rounds     runs of each side per scenario, taking turns; medians shown (default 3)
  --scenarios   comma-separated among quiet,busy1,busy2,over4,over8 (default: all)
  --idle S      seconds the idle ranks wait (default 1; 0 skips the idle figures)
  --min-time S  time each size for at least S seconds (default 0.05; 0: exactly -n iterations)
  --out DIR     where the CSV files and logs go (default: a new folder in \$TMPDIR or /tmp)
  --builddir    build tree holding tools/meshrun and bench/ (default: this script's ..)
  --peer-build  the peer is mesh built in this other tree (called "peer"), not MPI
EOF
}

minb=8 maxb=1m factor=2 iters=20 warmup=5 rounds=3 out=""
scenarios=quiet,busy1,busy2,over4,over8 idle=1 peer_build="" min_time=0.05
builddir=$(cd "$(dirname "$0")/.." && pwd)
[ -x "$builddir/tools/meshrun" ] || builddir=$(pwd)
. "$(dirname "$0")/compare_lib.sh"
extra_arg() {
    case $1 in
    --peer-build) peer_build=$2 ;;
    --scenarios) scenarios=$2 ;;
    --idle) idle=$2 ;;
    --min-time) min_time=$2 ;;
    *) return 1 ;;
    esac
}
parse_args "$@"

MESHRUN=$builddir/tools/meshrun
MESHBENCH=$builddir/bench/mesh-bench
MPIBENCH=$builddir/bench/mpi/mpi-bench
for f in "$MESHRUN" "$MESHBENCH"; do
    [ -x "$f" ] || { echo "contention.sh: $f not built (make first, or --builddir)" >&2; exit 2; }
done
PEER=MPI
if [ -n "$peer_build" ]; then
    PEER=peer
    for f in "$peer_build/tools/meshrun" "$peer_build/bench/mesh-bench"; do
        [ -x "$f" ] || { echo "contention.sh: $f not built" >&2; exit 2; }
    done
elif [ ! -x "$MPIBENCH" ] || ! command -v mpirun >/dev/null; then
    echo "contention.sh: mpi-bench or mpirun missing (configure found no MPI); try --peer-build" >&2
    exit 2
fi
[ -n "$out" ] || out=$(mktemp -d "${TMPDIR:-/tmp}/mesh-contention.XXXXXX")
mkdir -p "$out" || exit 2
status=0

# the first 2 CPUs this script may run on: every scenario runs there
cpus=$(taskset -pc $$ 2>/dev/null | sed 's/.*: //' | tr ',' '\n' |
    awk -F- '{ for (c = $1; c <= ($2 == "" ? $1 : $2); c++) print c }' | head -2 | paste -sd,)
pin=()
[ -n "$cpus" ] && command -v taskset >/dev/null && pin=(taskset -c "$cpus")
mpi_flags=(--bind-to none)
[ "$(id -u)" = 0 ] && mpi_flags+=(--allow-run-as-root)
bench_args=(-o allreduce -b "$minb" -e "$maxb" -f "$factor" -n "$iters" -w "$warmup" -c 1)
[ "$min_time" = 0 ] || bench_args+=(--min-time "$min_time") # 0 suits a peer build without it

# side NAME RANKS: the command of one side (mesh or the peer) for RANKS ranks
side() {
    if [ "$1" = mesh ]; then
        echo "$MESHRUN" -n "$2" "$MESHBENCH"
    elif [ -n "$peer_build" ]; then
        echo "$peer_build/tools/meshrun" -n "$2" "$peer_build/bench/mesh-bench"
    else
        local over=""
        [ "$2" -gt 2 ] && over=--oversubscribe
        echo mpirun -np "$2" "${mpi_flags[@]}" $over "$MPIBENCH"
    fi
}

busy_pids=()
busy_start() {
    local i
    for i in $(seq "$1"); do
        "${pin[@]}" sh -c 'while :; do :; done' &
        busy_pids+=($!)
    done
}
busy_stop() {
    local p
    for p in "${busy_pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    busy_pids=()
}
trap busy_stop EXIT

# scenario NAME RANKS BUSY: the rounds of both sides, then the medians
scenario() {
    local name=$1 n=$2 nbusy=$3 r
    busy_start "$nbusy"
    for r in $(seq "$rounds"); do
        run "mesh-$name.$r" "${pin[@]}" $(side mesh "$n") "${bench_args[@]}" \
            --csv "$out/mesh-$name.$r.csv"
        run "peer-$name.$r" "${pin[@]}" $(side peer "$n") "${bench_args[@]}" \
            --csv "$out/peer-$name.$r.csv"
    done
    busy_stop
    median "$out/mesh-$name.csv" $(ls "$out"/mesh-"$name".[0-9]*.csv 2>/dev/null)
    median "$out/peer-$name.csv" $(ls "$out"/peer-"$name".[0-9]*.csv 2>/dev/null)
}

# ratios NAME: size, median times, their ratio, and the ratio's range over single rounds
ratios() {
    local name=$1 r files=()
    for r in $(seq "$rounds"); do
        [ -f "$out/mesh-$name.$r.csv" ] && [ -f "$out/peer-$name.$r.csv" ] &&
            files+=("$out/mesh-$name.$r.csv" "$out/peer-$name.$r.csv")
    done
    [ -f "$out/mesh-$name.csv" ] && [ -f "$out/peer-$name.csv" ] || {
        echo "  (no results; see the logs in $out)"
        return 0
    }
    awk -F, -v P="$PEER" '
        FNR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; file++; next }
        $col["in_place"] != 0 { next }
        {
            k = $col["bytes"] + 0
            if (file == 1) {
                mt[k] = $col["time_us"]
                if (!(k in seen)) { order[n++] = k; seen[k] = 1 }
            }
            else if (file == 2) pt[k] = $col["time_us"]
            else if (file % 2 == 1) rm[k] = $col["time_us"]
            else if ((k in rm) && $col["time_us"] + 0 > 0) {
                q = rm[k] / $col["time_us"]; delete rm[k]
                if (!(k in lo) || q < lo[k]) lo[k] = q
                if (!(k in hi) || q > hi[k]) hi[k] = q
            }
        }
        END {
            f = "  %10s %12s %12s %10s %13s\n"
            printf f, "bytes", "mesh (us)", P " (us)", "mesh/" P, "one round"
            worst = 0
            for (i = 0; i < n; i++) {
                k = order[i]
                q = 0; ps = "-"; qs = "-"; rs = "-"
                if ((k in pt) && pt[k] > 0) {
                    q = mt[k] / pt[k]; ps = sprintf("%.2f", pt[k]); qs = sprintf("%.2f", q)
                }
                if (k in lo) rs = sprintf("%.2f-%.2f", lo[k], hi[k])
                if (q > worst) { worst = q; at = k }
                printf f, k, sprintf("%.2f", mt[k]), ps, qs, rs
            }
            if (worst > 0) printf "  highest mesh/%s: %.2f at %d bytes\n", P, worst, at
        }' "$out/mesh-$name.csv" "$out/peer-$name.csv" "${files[@]}"
}

echo "all-reduce (fp32 sum) mesh vs $PEER${peer_build:+ ($peer_build)} on one node," \
    "CPUs ${cpus:-all}"
echo "sizes $minb..$maxb x$factor, $iters iterations (warm-up $warmup) or more to last" \
    "${min_time} s, $rounds rounds taking turns"
echo "results and logs: $out"
for s in ${scenarios//,/ }; do
    case $s in
    quiet) n=2 busy=0 what="2 ranks, quiet" ;;
    busy1) n=2 busy=1 what="2 ranks, one busy process beside them" ;;
    busy2) n=2 busy=2 what="2 ranks, two busy processes beside them" ;;
    over4) n=4 busy=0 what="4 ranks on 2 CPUs" ;;
    over8) n=8 busy=0 what="8 ranks on 2 CPUs" ;;
    *) echo "contention.sh: unknown scenario $s" >&2; exit 2 ;;
    esac
    echo
    echo "== $s: $what"
    scenario "$s" "$n" "$busy"
    ratios "$s"
done

if [ "$idle" != 0 ]; then
    echo
    echo "== CPU use of ranks waiting $idle s for rank 0 (a barrier that rank 0 enters late)"
    for r in $(seq "$rounds"); do
        run "mesh-idle.$r" "${pin[@]}" $(side mesh 2) --idle "$idle"
        run "peer-idle.$r" "${pin[@]}" $(side peer 2) --idle "$idle"
    done
    for who in mesh peer; do
        v=$(for r in $(seq "$rounds"); do
            sed -n 's/^# idle: most CPU of a waiting rank: \([0-9.]*\)%.*/\1/p' \
                "$out/$who-idle.$r.log" 2>/dev/null
        done | median_of)
        label=$who
        [ "$who" = peer ] && label=$PEER
        echo "  $label: ${v:-?}% of a core (median of $rounds rounds)"
    done
fi
exit $status
