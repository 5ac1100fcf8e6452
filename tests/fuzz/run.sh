#!/bin/sh
# make fuzz: builds the fuzz targets with clang's libFuzzer, AddressSanitizer and UBSan in a copy
# of the tree (build-fuzz/src, tests/sanitize/tree.sh), then runs each for FUZZ_SECONDS (default
# 60) on its corpus: the seeds in tests/fuzz/corpus/<target>/ and what earlier runs added, kept in
# build-fuzz/corpus/<target>/. Prints executions and coverage per target. An input that crashes
# is saved in build-fuzz/crashes/ and fails the run; once the defect is fixed, copy it into
# tests/fuzz/corpus/<target>/ so that make check replays it.
#   FUZZ_SECONDS  seconds per target          FUZZ_TARGETS  which targets (default: all)
#   FUZZ_CC       the compiler (clang)        FUZZ_ARGS     more libFuzzer options
set -u
s=$(cd "${top_srcdir:-.}" && pwd)
b=$(cd "${top_builddir:-.}" && pwd)
secs=${FUZZ_SECONDS:-60}
targets=${FUZZ_TARGETS:-fuzz_bootstrap fuzz_tcp fuzz_shm fuzz_config fuzz_tune fuzz_topo}
cc=${FUZZ_CC:-clang}
work=$b/build-fuzz
if ! command -v "$cc" >/dev/null 2>&1; then
    echo "make fuzz: needs $cc with libFuzzer (Debian: apt-get install clang)" >&2
    exit 1
fi
echo "make fuzz: building the targets with $cc -fsanitize=fuzzer in $work/src"
flags="-O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined"
flags="$flags -fno-sanitize-recover=undefined"
top_srcdir=$s "${SHELL:-/bin/sh}" "$s/tests/sanitize/tree.sh" "$work" "$cc" "$flags" \
    "-fsanitize=address,undefined" --without-torch --without-mpi --without-openblas \
    --without-ucx --without-ofi --without-pmix --without-cuda --disable-nccl || exit 1
progs=
for t in $targets; do progs="$progs tests/fuzz/$t"; done
if ! make -C "$work/src" -j"${FUZZ_JOBS:-2}" FUZZ_DEFS=-DMESH_FUZZ_LIBFUZZER \
    FUZZ_LINK=-fsanitize=fuzzer $progs >"$work/build.log" 2>&1; then
    tail -n 40 "$work/build.log"
    exit 1
fi
mkdir -p "$work/crashes"
status=0
printf '%s\n' "target execs exec/s cov features corpus result" >"$work/table"
for t in $targets; do
    mkdir -p "$work/corpus/$t"
    seeds=$s/tests/fuzz/corpus/$t
    [ -d "$seeds" ] || seeds=
    max_len=8192 mode=
    if [ "$t" = fuzz_topo ]; then
        # hwloc itself crashes on some files (lstopo does too): run the inputs in child
        # processes and go on past those crashes, each checked with lstopo below; hwloc also
        # and leaks objects when a file fails to load: leaks are not looked for here
        max_len=65536 mode="-fork=1 -ignore_crashes=1 -detect_leaks=0"
    fi
    echo "== $t: $secs s"
    # A peer may announce a message of any length it could send, and an unexpected one gets a
    # buffer of that length: large allocations are the transports' normal work here. libFuzzer
    # does not stop at them (-malloc_limit_mb); the sanitizer refuses those above 256 MiB, which
    # exercises the transports' clean failure and spares the sanitizer marking gigabytes of
    # shadow memory on every such run.
    # shellcheck disable=SC2086
    ASAN_OPTIONS=${ASAN_OPTIONS:-allocator_may_return_null=1:max_allocation_size_mb=256} \
        "$work/src/tests/fuzz/$t" -max_total_time="$secs" -print_final_stats=1 -timeout=20 \
        -rss_limit_mb=4096 -malloc_limit_mb=1048576 -max_len=$max_len -artifact_prefix="$work/crashes/$t-" \
        $mode ${FUZZ_ARGS:-} "$work/corpus/$t" $seeds >"$work/$t.log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t.log" | tail -n 1)
    last=$(grep -E '^#[0-9]+' "$work/$t.log" | tail -n 1)
    [ -n "$execs" ] || execs=$(printf '%s\n' "$last" | sed -n 's/^#\([0-9]*\).*/\1/p')
    cov=$(printf '%s\n' "$last" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
    ft=$(printf '%s\n' "$last" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
    corp=$(printf '%s\n' "$last" | sed -n 's/.* corp: \([0-9]*\).*/\1/p')
    result=ok
    if [ -n "$mode" ]; then
        # a crash counts as hwloc's when hwloc's own lstopo dies on the same file; an input
        # that does not crash the target again (fork mode sometimes saves the wrong one, e.g.
        # an empty file) is counted apart
        hw=0 ours=0 gone=0
        for f in "$work/crashes/$t"-crash-*; do
            [ -f "$f" ] || continue
            if ASAN_OPTIONS=allocator_may_return_null=1 "$work/src/tests/fuzz/$t" \
                -detect_leaks=0 "$f" >/dev/null 2>&1; then
                gone=$((gone + 1))
                mkdir -p "$work/crashes/gone" && mv "$f" "$work/crashes/gone/"
                continue
            fi
            timeout 20 lstopo-no-graphics --input "$f" >/dev/null 2>&1
            if [ $? -ge 128 ]; then
                hw=$((hw + 1))
                mkdir -p "$work/crashes/hwloc" && mv "$f" "$work/crashes/hwloc/"
            else
                ours=$((ours + 1))
            fi
        done
        [ $hw -gt 0 ] && result="ok($hw-hwloc-crashes)"
        [ $gone -gt 0 ] && result="$result($gone-not-reproduced)"
        if [ $ours -gt 0 ]; then
            result="FAILED($ours-crashes)"
            status=1
        fi
    fi
    # in fork mode the exit status counts the crashes let through; their check above decides
    if [ $rc -ne 0 ] && [ -z "$mode" ]; then
        result="FAILED(exit $rc)"
        status=1
        grep -E 'ERROR|SUMMARY|Test unit written' "$work/$t.log" | head -n 5
    fi
    eps=$(awk -v e="${execs:-0}" -v s="$secs" 'BEGIN { printf "%.0f", e / s }')
    echo "$t ${execs:-?} $eps ${cov:-?} ${ft:-?} ${corp:-?} $result" >>"$work/table"
done
echo
column -t "$work/table" 2>/dev/null || cat "$work/table"
echo "(cov: edges of the instrumented code reached; features: libFuzzer's finer measure;"
echo " logs in $work/<target>.log, crashing inputs in $work/crashes/)"
exit $status
