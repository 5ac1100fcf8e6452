# Shell functions shared by the comparison scripts (compare.sh, compare-net.sh); sourced first.
# run, median and iperf need $out (the output folder), $MESHRUN and $status set by the caller.

# parse_args "$@": the options both scripts take, into ops, minb, maxb, factor, iters, warmup,
# rounds, out, builddir and skip_iperf (the caller sets their defaults and usage()). Any other
# option with a value goes to the caller's extra_arg NAME VALUE, which fails for one it does
# not know either.
parse_args() {
    while [ $# -gt 0 ]; do
        case $1 in
        -o) ops=$2; shift 2 ;;
        -b) minb=$2; shift 2 ;;
        -e) maxb=$2; shift 2 ;;
        -f) factor=$2; shift 2 ;;
        -n) iters=$2; shift 2 ;;
        -w) warmup=$2; shift 2 ;;
        -r) rounds=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --builddir) builddir=$2; shift 2 ;;
        --skip-iperf) skip_iperf=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *)
            if [ $# -ge 2 ] && extra_arg "$1" "$2"; then
                shift 2
            else
                echo "${0##*/}: unknown argument '$1'" >&2; usage >&2; exit 2
            fi ;;
        esac
    done
}

# median_of: the median of the numbers on standard input, one per line (nothing when none)
median_of() {
    sort -g | awk '{ v[++n] = $1 }
        END { if (n) print n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }'
}

# run NAME command...: output to $out/NAME.log, a note on failure
run() {
    local name=$1; shift
    if ! "$@" >"$out/$name.log" 2>&1; then
        echo "warning: $name failed (exit $?); see $out/$name.log"
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

# iperf_gbits LOG: the receiver's Gbit/s of each stream in an iperf3 log, one per line
iperf_gbits() {
    awk '/receiver/ { for (i = 1; i <= NF; i++) if ($i == "Gbits/sec") print $(i - 1) }' "$1"
}
