# Helpers of the mesh-train tests, sourced first: sets b (the build tree), prog (mesh-train) and
# tmp (a scratch folder, removed at exit), and skips (77) when mesh-train is not built. The test
# then sets model (the options every run shares) and status=0; steps_expected, when set, is the
# number of steps every compared run must have from its first compared step on.
b=${top_builddir:-.}
prog="$b/bench/mesh-train"
if [ ! -x "$prog" ]; then
    echo "SKIP: bench/mesh-train not built (configure found no OpenBLAS)"
    exit 77
fi
export MESH_TIMEOUT=${MESH_TIMEOUT:-60}
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# worst NAME REF [FORMAT]: the largest relative difference of the loss over the steps of NAME.csv
# against REF.csv, printed with FORMAT (default %.2e)
worst() {
    awk -F, -v fmt="${3:-%.2e}" '/^#/ || $1 == "step" { next }
        NR == FNR { ref[$1] = $2; next }
        { d = ($2 - ref[$1]) / ref[$1]; if (d < 0) d = -d; if (d > w) w = d }
        END { printf fmt, w }' "$tmp/$2.csv" "$tmp/$1.csv"
}

fail() {
    echo "FAIL: $*"
    status=1
}

# train NAME RANKS [meshrun options --] mesh-train options: runs, leaves NAME.csv and NAME.out
train() {
    name=$1 n=$2
    shift 2
    mr=""
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do mr="$mr $1"; shift; done
    [ $# -gt 0 ] && shift
    # shellcheck disable=SC2086
    if ! "$b/tools/meshrun" -n "$n" $mr --timeout 120 "$prog" $model --csv "$tmp/$name.csv" \
        "$@" >"$tmp/$name.out" 2>&1; then
        fail "$name: mesh-train failed"
        head -20 "$tmp/$name.out"
        return 1
    fi
}

# same_column NAME REF COLUMN TOL [FIRST]: CSV column COLUMN (2: the loss) of every step from
# FIRST on within TOL relative of the reference run's (0: equal)
same_column() {
    awk -F, -v col="$3" -v tol="$4" -v first="${5:-1}" -v name="$1" \
        -v want="${steps_expected:-}" '
        /^#/ || $1 == "step" { next }
        NR == FNR { ref[$1] = $col; next }
        $1 >= first {
            seen++
            if (!($1 in ref)) { printf "%s: step %s not in the reference\n", name, $1; bad++; next }
            d = $col - ref[$1]; if (d < 0) d = -d
            r = ref[$1] < 0 ? -ref[$1] : ref[$1]
            if (d > tol * r) {
                printf "%s: step %s column %d %s, reference %s\n", name, $1, col, $col, ref[$1]
                bad++
            }
        }
        END {
            if (seen < 1) { printf "%s: no steps\n", name; bad++ }
            else if (want != "" && seen != want) {
                printf "%s: %d steps, not %d\n", name, seen, want
                bad++
            }
            exit bad > 0
        }' "$tmp/$2.csv" "$tmp/$1.csv" || fail "$1: column $3 differs from $2 beyond $4"
}

# same_loss NAME REF TOL [FIRST]: the loss of every step from FIRST on within TOL relative
same_loss() {
    same_column "$1" "$2" 2 "$3" "${4:-1}"
}

# same_params A B TOL: two --dump-params files within TOL (absolute)
same_params() {
    paste -d' ' "$tmp/$1.params" "$tmp/$2.params" | awk -v tol="$3" -v name="$1 vs $2" '
        $1 == "#" {
            if ($2 != $6) { printf "%s: tensor %s against %s\n", name, $2, $6; bad++ }
            t = $2
            next
        }
        { n++; d = $1 - $2; if (d < 0) d = -d; if (d > worst) { worst = d; at = t } }
        END { if (n == 0) { printf "%s: empty\n", name; exit 1 }
              if (worst > tol)
                  printf "%s: %d values, largest difference %g in %s\n", name, n, worst, at
              exit (bad > 0 || worst > tol) }' || fail "$1: parameters differ from $2 beyond $3"
}

# refused WANT RANKS [meshrun options --] mesh-train options: fails, saying WANT
refused() {
    want=$1 n=$2
    shift 2
    mr=""
    case " $* " in *" -- "*)
        while [ "$1" != "--" ]; do mr="$mr $1"; shift; done
        shift ;;
    esac
    # shellcheck disable=SC2086
    if "$b/tools/meshrun" -n "$n" $mr --timeout 60 "$prog" $model "$@" >"$tmp/refused.out" \
        2>&1; then
        fail "mesh-train $* succeeded"
    elif ! grep -q -- "$want" "$tmp/refused.out"; then
        fail "mesh-train $*: no '$want' in:"
        head -5 "$tmp/refused.out"
    fi
}
