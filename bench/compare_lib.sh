# Shell functions shared by the comparison scripts (compare.sh, compare-net.sh, and
# torch-bench.sh's parse_args and run); sourced first. run, median and the iperf functions need
# $out (the output folder), $MESHRUN and $status set by the caller; table and iperf_medians also
# need $rounds.

# parse_args "$@": the options the scripts take, into ops, minb, maxb, factor, iters, warmup,
# rounds, out, builddir and skip_iperf (the caller sets their defaults and usage(); -o and
# --skip-iperf are taken only where it gave ops and skip_iperf one). Any other option with a
# value goes to the caller's extra_arg NAME VALUE, which fails for one it does not know either.
parse_args() {
    while [ $# -gt 0 ]; do
        case $1 in
        -o) [ -n "${ops+set}" ] || unknown_arg "$1"; ops=$2; shift 2 ;;
        -b) minb=$2; shift 2 ;;
        -e) maxb=$2; shift 2 ;;
        -f) factor=$2; shift 2 ;;
        -n) iters=$2; shift 2 ;;
        -w) warmup=$2; shift 2 ;;
        -r) rounds=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --builddir) builddir=$2; shift 2 ;;
        --skip-iperf) [ -n "${skip_iperf+set}" ] || unknown_arg "$1"; skip_iperf=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *)
            if [ $# -ge 2 ] && extra_arg "$1" "$2"; then
                shift 2
            else
                unknown_arg "$1"
            fi ;;
        esac
    done
}

unknown_arg() {
    echo "${0##*/}: unknown argument '$1'" >&2; usage >&2; exit 2
}

# median_of: the median of the numbers on standard input, one per line (nothing when none)
median_of() {
    sort -g | awk '{ v[++n] = $1 }
        END { if (n) print n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }'
}

# run NAME command...: output to $out/NAME.log, a note on failure
run() {
    local name=$1 rc=0; shift
    "$@" >"$out/$name.log" 2>&1 || rc=$?
    if [ "$rc" -ne 0 ]; then
        echo "warning: $name failed (exit $rc); see $out/$name.log"
        status=1
    fi
}

# median OUT IN...: one row per (op, bytes, in_place) with the median time and busbw of the
# rounds (the other columns from the first round that has the row)
median() {
    local o=$1; shift
    [ $# -gt 0 ] || return 0
    awk -F, -v OFS=, '
        FNR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; if (!hdr) print; hdr = 1; next }
        {
            k = $col["op"] SUBSEP $col["bytes"] SUBSEP $col["in_place"]
            if (!(k in row)) { row[k] = $0; order[n++] = k }
            c = ++cnt[k]; t[k, c] = $col["time_us"]; b[k, c] = $col["busbw_GBps"]
        }
        function med(arr, k, m,   i, j, v, x) {
            for (i = 1; i <= m; i++) v[i] = arr[k, i]
            for (i = 2; i <= m; i++)
                for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) { x = v[j]; v[j] = v[j - 1]; v[j - 1] = x }
            return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
        }
        END {
            for (i = 0; i < n; i++) {
                k = order[i]; split(row[k], f, ",")
                f[col["time_us"]] = med(t, k, cnt[k]); f[col["busbw_GBps"]] = med(b, k, cnt[k])
                line = f[1]; for (j = 2; j in f; j++) line = line OFS f[j]
                print line
            }
        }' "$@" >"$o"
}

# table NAME (compare.sh's tables): time and busbw of mesh and MPI per op and size (out of
# place) from the medians ($out/{mesh,mpi}-NAME.csv), the busbw ratio mesh/MPI ($PEER names the
# peer when it is not MPI), and the lowest
# and highest ratio of one round (mesh's round r against MPI's round r, which ran right after
# it). Both ratios come from the times (MPI time over mesh time: busbw's ratio for the same op
# and size), as the CSV's busbw column rounds a slow round's figure down to zero.
table() {
    local name=$1 r files=()
    for r in $(seq "$rounds"); do
        [ -f "$out/mesh-$name.$r.csv" ] && [ -f "$out/mpi-$name.$r.csv" ] &&
            files+=("$out/mesh-$name.$r.csv" "$out/mpi-$name.$r.csv")
    done
    awk -F, -v P="${PEER:-MPI}" '
        FNR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; file++; next }
        $col["in_place"] != 0 { next }
        {
            key = $col["op"] SUBSEP $col["bytes"]
            if (file == 1) {
                mbw[key] = $col["busbw_GBps"]; mt[key] = $col["time_us"]; algo[key] = $col["algo"]
                if (!(key in seen)) { order[n++] = key; seen[key] = 1 }
            } else if (file == 2) { pbw[key] = $col["busbw_GBps"]; pt[key] = $col["time_us"] }
            else if (file % 2 == 1) rm[key] = $col["time_us"]
            else if (key in rm && rm[key] + 0 > 0) {
                q = $col["time_us"] / rm[key]; delete rm[key]
                if (!(key in lo) || q < lo[key]) lo[key] = q
                if (!(key in hi) || q > hi[key]) hi[key] = q
            }
        }
        END {
            f = "  %-15s %10s  %-13s %10s %10s %10s %10s %9s %11s\n"
            printf f, "op", "bytes", "mesh algo", "mesh time", P " time", "mesh busbw",
                   P " busbw", "mesh/" P, "one round"
            printf f, "", "", "", "(us)", "(us)", "(GB/s)", "(GB/s)", "busbw", "low-high"
            for (i = 0; i < n; i++) {
                k = order[i]; split(k, kk, SUBSEP)
                have = k in pbw
                r = have && mt[k] + 0 > 0 ? sprintf("%.2f", pt[k] / mt[k]) : "-"
                spread = k in lo ? sprintf("%.2f-%.2f", lo[k], hi[k]) : "-"
                printf f, kk[1], kk[2], algo[k], sprintf("%.2f", mt[k]),
                       have ? sprintf("%.2f", pt[k]) : "-", sprintf("%.4f", mbw[k]),
                       have ? sprintf("%.4f", pbw[k]) : "-", r, spread
            }
        }' "$out/mesh-$name.csv" "$([ -f "$out/mpi-$name.csv" ] && echo "$out/mpi-$name.csv" ||
            echo /dev/null)" "${files[@]}"
}

# iperf LOG [CLIENT FLAGS]: iperf3 between two namespaces like meshrun's (root only): rank 0
# serves, rank 1 sends one stream for 3 s (with --bidir, one stream each way at once: the
# traffic of a 2-rank collective, which shares the same CPUs between both directions when the
# nodes are simulated)
iperf() {
    "$MESHRUN" -n 2 --nodes 2 --netns on --timeout 30 sh -c '
        port=${MESH_ADDR##*:}
        if [ "$MESH_RANK" = 0 ]; then exec iperf3 -s -1 -p "$port" >/dev/null
        else sleep 1; exec iperf3 -c "${MESH_ADDR%:*}" -p "$port" -P 1 -t 3 -f g '"${2:-}"'; fi' \
        >"$1" 2>&1
}

# iperf_check: do_iperf=1 when iperf3 can run between namespaces here, else 0 with the reason
# in iperf_note (needs $skip_iperf)
iperf_check() {
    do_iperf=0
    if [ "$skip_iperf" = 1 ]; then iperf_note="skipped (--skip-iperf)"
    elif [ "$(id -u)" != 0 ]; then iperf_note="skipped (needs root to create network namespaces)"
    elif ! command -v iperf3 >/dev/null; then iperf_note="skipped (not installed)"
    else do_iperf=1; iperf_note=""
    fi
}

# iperf_round R: iperf3 one way and both ways at once for round R, to $out/iperf3.R.log and
# $out/iperf3_bidir.R.log
iperf_round() {
    iperf "$out/iperf3.$1.log"
    iperf "$out/iperf3_bidir.$1.log" --bidir
}

# iperf_medians: over the $rounds rounds' logs, the median Gbit/s of one stream into
# iperf_one and of one direction of --bidir (the mean of both) into iperf_per; empty when
# no round has a result
iperf_medians() {
    local r
    iperf_one=$(for r in $(seq "$rounds"); do
        [ -f "$out/iperf3.$r.log" ] && iperf_gbits "$out/iperf3.$r.log" | tail -1
    done | median_of)
    iperf_per=$(for r in $(seq "$rounds"); do
        [ -f "$out/iperf3_bidir.$r.log" ] && iperf_gbits "$out/iperf3_bidir.$r.log" | tail -2 |
            awk '{ s += $1 } END { if (NR == 2) print s / 2 }'
    done | median_of)
}

# iperf_gbits LOG: the receiver's Gbit/s of each stream in an iperf3 log, one per line
iperf_gbits() {
    awk '/receiver/ { for (i = 1; i <= NF; i++) if ($i == "Gbits/sec") print $(i - 1) }' "$1"
}
