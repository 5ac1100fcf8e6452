#!/bin/sh
# bench/plan-check.sh: does mesh-plan's calibration predict this machine? Two separate mesh-bench
# runs of the per-axis bench (by default tp=2,dp=2,pp=2 on 8 ranks over 2 simulated nodes,
# all-reduce, all-gather, reduce-scatter and send/recv on every axis); mesh-plan --calibrate
# reads the first and predicts the time of every axis, op and size of the second. Prints the
# table and exits 0 when every prediction is within the tolerance, 1 otherwise.
#
#   bench/plan-check.sh [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP] [-t TOLERANCE]
#                       [--mesh SIZES] [-o OPS] [--between] [--keep DIR]
#
# --mesh and -o choose the axes and ops measured: --mesh tp=2,cp=2,ep=2 -o
# allreduce,allgather,reduce_scatter,alltoall,sendrecv checks the context-parallel ring's
# send/recv and the expert all-to-all the planner times cp and ep with.
# --between runs the second bench at the sizes halfway (geometrically) between the first's, so
# that every prediction is an interpolation, not a repeat. Run it on a quiet machine: the load
# average is printed before and after each run.
top_builddir=${top_builddir:-$(cd "$(dirname "$0")/.." && pwd)}
MESHRUN="$top_builddir/tools/meshrun"
BENCH="$top_builddir/bench/mesh-bench"
PLAN="$top_builddir/tools/mesh-plan"
min=1m max=32m factor=2 iters=20 warmup=5 tol=0.25 between=0 keep=
mesh=tp=2,dp=2,pp=2 ops=allreduce,allgather,reduce_scatter,sendrecv

usage() {
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
    exit "$1"
}
while [ $# -gt 0 ]; do
    case "$1" in
    -b) min=$2; shift ;;
    -e) max=$2; shift ;;
    -f) factor=$2; shift ;;
    -n) iters=$2; shift ;;
    -w) warmup=$2; shift ;;
    -t) tol=$2; shift ;;
    --mesh) mesh=$2; shift ;;
    -o) ops=$2; shift ;;
    --between) between=1 ;;
    --keep) keep=$2; shift ;;
    -h | --help) usage 0 ;;
    *) echo "plan-check: unknown option $1" >&2; usage 2 >&2 ;;
    esac
    shift
done
for p in "$MESHRUN" "$BENCH" "$PLAN"; do
    [ -x "$p" ] || { echo "plan-check: $p is not built (make first)" >&2; exit 2; }
done
if [ -n "$keep" ]; then
    dir=$keep
    mkdir -p "$dir" || exit 2
else
    dir=$(mktemp -d) || exit 2
    trap 'rm -rf "$dir"' EXIT
fi

# bytes of a size with an optional k/m/g suffix, as mesh-bench reads it
bytes() {
    awk -v s="$1" 'BEGIN { n = s + 0; u = tolower(substr(s, length(s)));
        if (u == "k") n *= 1024; else if (u == "m") n *= 1048576; else if (u == "g") n *= 1073741824;
        printf "%d", n }'
}

run() { # csv min max
    echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
    "$MESHRUN" -n "$ranks" --nodes 2 --timeout 900 "$BENCH" --mesh "$mesh" --axes all \
        -o "$ops" -b "$2" -e "$3" -f "$factor" \
        -n "$iters" -w "$warmup" --csv "$1" >"$1.log" 2>&1
    rc=$?
    echo "# load average after:  $(cut -d' ' -f1-3 /proc/loadavg)"
    if [ $rc -ne 0 ]; then
        echo "plan-check: mesh-bench failed (status $rc):" >&2
        tail -20 "$1.log" >&2
        exit 2
    fi
}

# the ranks the sizes multiply to
ranks=$(echo "$mesh" | tr ',' '\n' | awk -F= '{ n = (n ? n : 1) * $2 } END { print n + 0 }')
[ "$ranks" -ge 2 ] || { echo "plan-check: --mesh $mesh: sizes multiply to $ranks" >&2; exit 2; }
lo=$(bytes "$min") hi=$(bytes "$max")
echo "# run 1 (calibration): $lo to $hi bytes, x$factor, $iters iterations after $warmup"
run "$dir/run1.csv" "$lo" "$hi"
if [ "$between" = 1 ]; then
    lo2=$(awk -v a="$lo" -v f="$factor" 'BEGIN { printf "%d", a * sqrt(f) }')
    hi2=$(awk -v a="$hi" -v f="$factor" 'BEGIN { printf "%d", a / sqrt(f) }')
else
    lo2=$lo hi2=$hi
fi
echo "# run 2 (checked): $lo2 to $hi2 bytes"
run "$dir/run2.csv" "$lo2" "$hi2"
"$PLAN" --calibrate "$dir/run1.csv"
echo
"$PLAN" --calibrate "$dir/run1.csv" --compare "$dir/run2.csv" --tolerance "$tol" --min-bytes "$lo"
