#!/bin/bash
# The network transports side by side: mesh-bench on 2 ranks in 2 simulated nodes (meshrun
# --nodes 2), once over each of tcp, ucx and ofi (MESH_NET), taking turns --rounds times, with
# iperf3 single-stream throughput between two namespaces built like meshrun's measured in every
# round (one way, and one stream each way at once). For every op and size the table shows the
# median busbw of each transport and the ratio of the slowest to the fastest; below it, busbw at
# the largest sizes as a fraction of iperf3's medians. UCX_TLS and FI_PROVIDER are passed on;
# unset, they are tcp, the path every host has. CSV files of every run stay in the output folder.
set -u

usage() {
    cat <<EOF
usage: $0 [-o ops] [-b min] [-e max] [-f factor] [-n iters] [-w warmup] [-r rounds]
          [--nets LIST] [--out DIR] [--builddir DIR] [--skip-iperf]
  -o ops        comma-separated, as in mesh-bench (default allreduce,allgather)
  -b/-e/-f      sizes as in mesh-bench (default 1m / 256m / 4)
  -n/-w         timed and warm-up iterations per size (default 10 / 3)
  -r rounds     runs of each transport, taking turns; medians are shown (default 3)
  --nets LIST   transports to compare (default: those of tcp,ucx,ofi usable here)
  --out DIR     where the CSV files and logs go (default: a new folder in \$TMPDIR or /tmp)
  --builddir    build tree holding tools/ and bench/ (default: this script's .. when
                built there, else the current folder)
EOF
}

ops=allreduce,allgather
minb=1m maxb=256m factor=4 iters=10 warmup=3 rounds=3 nets="" out="" skip_iperf=0
# a build in the source tree, else (sources and build apart) the folder it is run from
builddir=$(cd "$(dirname "$0")/.." && pwd)
[ -x "$builddir/tools/meshrun" ] || builddir=$(pwd)
. "$(dirname "$0")/compare_lib.sh"
extra_arg() {
    case $1 in
    --nets) nets=$2 ;;
    *) return 1 ;;
    esac
}
parse_args "$@"

MESHRUN=$builddir/tools/meshrun
MESHBENCH=$builddir/bench/mesh-bench
MESHINFO=$builddir/tools/mesh-info
for f in "$MESHRUN" "$MESHBENCH" "$MESHINFO"; do
    [ -x "$f" ] || { echo "compare-net.sh: $f not built (make first, or --builddir)" >&2; exit 2; }
done
[ -n "$out" ] || out=$(mktemp -d "${TMPDIR:-/tmp}/mesh-compare-net.XXXXXX")
mkdir -p "$out" || exit 2
status=0
export UCX_TLS=${UCX_TLS:-tcp} FI_PROVIDER=${FI_PROVIDER:-tcp}

usable=$("$MESHINFO" -t 2>/dev/null | awk '$2 == "usable" { print $1 }')
if [ -z "$nets" ]; then
    for t in tcp ucx ofi; do
        if printf '%s\n' "$usable" | grep -qx "$t"; then
            nets=${nets:+$nets,}$t
        else
            echo "note: $t not usable here: left out"
        fi
    done
fi
IFS=, read -r -a netlist <<<"$nets"
[ ${#netlist[@]} -gt 0 ] || { echo "compare-net.sh: no network transport to compare" >&2; exit 2; }
for t in "${netlist[@]}"; do
    printf '%s\n' "$usable" | grep -qx "$t" || {
        echo "compare-net.sh: transport '$t' is not usable here (see mesh-info -t)" >&2
        exit 2
    }
done
iperf_check

echo "mesh over ${nets//,/, } between 2 simulated nodes, 1 rank each; sizes $minb..$maxb" \
    "x$factor, $iters iterations (warm-up $warmup), $rounds rounds"
echo "UCX_TLS=$UCX_TLS FI_PROVIDER=$FI_PROVIDER; results and logs: $out"
common=(-o "$ops" -b "$minb" -e "$maxb" -f "$factor" -n "$iters" -w "$warmup" -c 1)
for r in $(seq "$rounds"); do
    [ $do_iperf = 1 ] && iperf_round "$r"
    for t in "${netlist[@]}"; do
        run "$t.$r" env MESH_NET="$t" "$MESHRUN" -n 2 --nodes 2 --timeout 3600 "$MESHBENCH" \
            "${common[@]}" --csv "$out/$t.$r.csv"
    done
done
for t in "${netlist[@]}"; do
    median "$out/$t.csv" $(ls "$out/$t".[0-9]*.csv 2>/dev/null)
done

# iperf3 medians in GB/s: one way, and the mean of both directions at once
iperf_medians
one=$(echo "$iperf_one" | awk 'NF { printf "%.3f", $1 / 8 }')
both=$(echo "$iperf_per" | awk 'NF { printf "%.3f", $1 / 8 }')

# the table: one row per op and size (out of place), busbw of each transport, slowest/fastest,
# then busbw over iperf3 at the two largest sizes
files=()
for t in "${netlist[@]}"; do [ -s "$out/$t.csv" ] && files+=("$out/$t.csv"); done
[ ${#files[@]} -gt 0 ] || { echo "compare-net.sh: no results; see the logs in $out" >&2; exit 1; }
echo
awk -F, -v nets="$nets" -v one="$one" -v both="$both" '
    FNR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; split(FILENAME, p, "/")
               t = p[length(p)]; sub(/\.csv$/, "", t); next }
    $col["in_place"] != 0 { next }
    {
        k = $col["op"] SUBSEP $col["bytes"]
        if (!(k in seen)) { seen[k] = 1; order[n++] = k; top[$col["op"]] = $col["bytes"] + 0 }
        if ($col["bytes"] + 0 > top[$col["op"]]) top[$col["op"]] = $col["bytes"] + 0
        bw[k, t] = $col["busbw_GBps"]
    }
    END {
        nt = split(nets, T, ",")
        printf "  %-12s %10s", "op", "bytes"
        for (j = 1; j <= nt; j++) printf " %10s", T[j]
        printf " %15s\n", "slowest/fastest"
        printf "  %-12s %10s", "", ""
        for (j = 1; j <= nt; j++) printf " %10s", "(GB/s)"
        printf "\n"
        for (i = 0; i < n; i++) {
            split(order[i], kk, SUBSEP); lo = -1; hi = 0
            printf "  %-12s %10s", kk[1], kk[2]
            for (j = 1; j <= nt; j++) {
                if ((order[i], T[j]) in bw) {
                    v = bw[order[i], T[j]] + 0; printf " %10.3f", v
                    if (lo < 0 || v < lo) lo = v
                    if (v > hi) hi = v
                } else printf " %10s", "-"
            }
            printf " %15s\n", (hi > 0 && lo >= 0 ? sprintf("%.2f", lo / hi) : "-")
        }
        if (one == "") exit
        printf "\n  iperf3 between the namespaces (median of the rounds): one stream %.3f GB/s; " \
               "one each way at once %.3f GB/s per direction\n", one, both
        for (i = 0; i < n; i++) {
            split(order[i], kk, SUBSEP)
            if (kk[2] + 0 < top[kk[1]] / 4) continue
            printf "  %-12s %10s busbw / one-way (/ per direction both ways):", kk[1], kk[2]
            for (j = 1; j <= nt; j++)
                if ((order[i], T[j]) in bw)
                    printf " %s %.2f (%.2f)", T[j], bw[order[i], T[j]] / one,
                           (both > 0 ? bw[order[i], T[j]] / both : 0)
            printf "\n"
        }
    }' "${files[@]}"
[ $do_iperf = 1 ] || echo "  iperf3: $iperf_note"
exit $status
