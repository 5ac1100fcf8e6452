#!/bin/sh
# Mutation check: applies each single-line mutation of tests/mutants/mutants.txt in turn to a
# scratch copy of the tree, rebuilds, and runs the tests listed with it; a mutation is killed
# when one of them fails (or runs past its time limit) and survives when all pass. Not part of
# make check: a full run rebuilds the tree once per mutation (about an hour on 2 cores).
#
# usage: tests/mutants/run.sh [-j JOBS] [-o NAME,...] [-l] [SCRATCH]
#   -j JOBS      parallel make jobs (default: the number of CPUs)
#   -o NAMES     only these mutations (comma-separated)
#   -l           list the mutations and exit
#   SCRATCH      folder for the copy of the tree (default: a new one in $TMPDIR or /tmp,
#                removed at the end); an existing copy is reused, configured and built
#
# Each record of mutants.txt is a group of lines, "key value":
#   mutant NAME          starts a record
#   area AREA            what it breaks (reductions, patterns, algorithms, shm, tcp, ...)
#   file PATH            the file to change, relative to the top of the tree
#   from TEXT            text that occurs exactly once in the file (leading blanks ignored)
#   to TEXT              what replaces it
#   test COMMAND         run from the build tree with sh; one line per command, in order
# Before any mutation, every test command must pass on the unchanged tree.
# Prints one line per mutation and the score; exits 1 when a mutation survives or a record
# does not apply (its text is gone or no longer unique), 0 otherwise.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
list="$here/mutants.txt"
jobs=$(nproc 2>/dev/null || echo 2)
only="" listonly=0 scratch=""
while [ $# -gt 0 ]; do
    case $1 in
    -j) jobs=$2; shift 2 ;;
    -o) only=$2; shift 2 ;;
    -l) listonly=1; shift ;;
    -h | --help) sed -n '2,25p' "$0"; exit 0 ;;
    -*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    *) scratch=$1; shift ;;
    esac
done

# the records, one per line: name, area, file, from, to, tests (tests joined by \036), \037
# between fields
records=$(awk '
    function flush() {
        if (name != "") printf "%s\037%s\037%s\037%s\037%s\037%s\n", name, area, file, from, to, tests
        name = ""; area = ""; file = ""; from = ""; to = ""; tests = ""
    }
    /^[ \t]*#/ || /^[ \t]*$/ { next }
    {
        key = $1; val = $0; sub(/^[ \t]*[a-z]+[ \t]*/, "", val)
        if (key == "mutant") { flush(); name = val }
        else if (key == "area") area = val
        else if (key == "file") file = val
        else if (key == "from") from = val
        else if (key == "to") to = val
        else if (key == "test") tests = tests (tests == "" ? "" : "\036") val
        else { printf "mutants.txt:%d: unknown key %s\n", NR, key > "/dev/stderr"; exit 1 }
    }
    END { flush() }' "$list") || exit 2
field() { printf '%s\n' "$1" | awk -F '\037' -v i="$2" '{ print $i }'; }
selected() { [ -z "$only" ] || printf ',%s,' "$only" | grep -q ",$1,"; }

if [ $listonly = 1 ]; then
    printf '%s\n' "$records" | awk -F '\037' '{ printf "%-34s %-12s %s\n", $1, $2, $3 }'
    exit 0
fi

cleanup=""
if [ -z "$scratch" ]; then
    scratch=$(mktemp -d "${TMPDIR:-/tmp}/mesh-mutants.XXXXXX") || exit 2
    cleanup=$scratch
fi
trap '[ -n "$cleanup" ] && rm -rf "$cleanup"' EXIT INT TERM
mkdir -p "$scratch" || exit 2
scratch=$(cd "$scratch" && pwd)
log="$scratch/mutants.log"
echo "mutants: tree copied to $scratch (log: $log)"
# the tracked files as they are now, uncommitted changes included
(cd "$src" && git ls-files -z | tar --null --no-recursion -T - -cf -) | tar -C "$scratch" -xf - ||
    exit 2
cd "$scratch" || exit 2
build() { make -j"$jobs" >>"$log" 2>&1 && make -j"$jobs" check TESTS= >>"$log" 2>&1; }
if [ ! -f Makefile ]; then
    { ./autogen.sh && ./configure -q; } >>"$log" 2>&1 || { echo "mutants: configure failed"; exit 2; }
fi
build || { echo "mutants: the unchanged tree does not build (see $log)"; exit 2; }

export top_builddir=. top_srcdir=.
# a hang shows as a failure after this many seconds instead of the usual minutes
export MESH_TIMEOUT=${MESH_TIMEOUT:-20}
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
# runs the test commands of a record; prints the first that fails, or nothing
run_tests() {
    printf '%s\n' "$1" | tr '\036' '\n' | while IFS= read -r t; do
        [ -n "$t" ] || continue
        echo "== $t" >>"$log"
        if ! timeout 600 sh -c "$t" >>"$log" 2>&1; then
            printf '%s\n' "$t"
            break
        fi
    done
}

echo "mutants: the tests on the unchanged tree"
status=0
for t in $(printf '%s\n' "$records" | awk -F '\037' '{ print NR }'); do
    r=$(printf '%s\n' "$records" | sed -n "${t}p")
    name=$(field "$r" 1)
    selected "$name" || continue
    bad=$(run_tests "$(field "$r" 6)")
    if [ -n "$bad" ]; then
        echo "mutants: $name: fails unchanged: $bad"
        status=2
    fi
done
[ $status = 0 ] || exit 2

killed=0 survived=0 broken=0 total=0 survivors=""
for t in $(printf '%s\n' "$records" | awk -F '\037' '{ print NR }'); do
    r=$(printf '%s\n' "$records" | sed -n "${t}p")
    name=$(field "$r" 1) area=$(field "$r" 2) file=$(field "$r" 3)
    selected "$name" || continue
    total=$((total + 1))
    start=$(date +%s)
    cp "$file" "$file.orig"
    if ! MUT_FROM=$(field "$r" 4) MUT_TO=$(field "$r" 5) awk '
        BEGIN { f = ENVIRON["MUT_FROM"]; t = ENVIRON["MUT_TO"]; n = 0 }
        { i = index($0, f); if (i) { n++; $0 = substr($0, 1, i - 1) t substr($0, i + length(f)) } print }
        END { exit n == 1 ? 0 : 3 }' "$file.orig" >"$file"; then
        printf '%-34s %-12s DOES NOT APPLY (text gone or not unique in %s)\n' "$name" "$area" "$file"
        mv "$file.orig" "$file"
        broken=$((broken + 1))
        continue
    fi
    echo "==== $name: $file" >>"$log"
    if ! build; then
        result="DOES NOT BUILD"
        broken=$((broken + 1))
    else
        bad=$(run_tests "$(field "$r" 6)")
        if [ -n "$bad" ]; then
            result="killed by: $bad"
            killed=$((killed + 1))
        else
            result="SURVIVED"
            survived=$((survived + 1))
            survivors="$survivors $name"
        fi
    fi
    mv "$file.orig" "$file"
    touch "$file"
    printf '%-34s %-12s %4ss  %s\n' "$name" "$area" $(($(date +%s) - start)) "$result"
done
build || echo "mutants: the restored tree no longer builds"
echo "mutants: $killed of $total killed, $survived survived${survivors:+ ($survivors )}, $broken not applied"
[ $survived = 0 ] && [ $broken = 0 ]
