#!/bin/sh
# make check-tsan: the multi-process tests that use threads, built with ThreadSanitizer in a copy
# of the tree (build-tsan/src, tests/sanitize/tree.sh): the progress thread and a communicator
# shared by two threads (tests/mp/progress.sh), abort from another thread and the nonblocking
# initialisation of the NCCL shim (tests/nccl/nccl_abi.sh), the logger's threads
# (tests/unit/test_log). Any report fails the test that printed it.
#   TSAN_TESTS  which tests (default: those above)     TSAN_CC  the compiler (default: cc)
set -u
s=$(cd "${top_srcdir:-.}" && pwd)
b=$(cd "${top_builddir:-.}" && pwd)
work=$b/build-tsan
tests=${TSAN_TESTS:-tests/mp/progress.sh tests/nccl/nccl_abi.sh tests/unit/test_log}
echo "make check-tsan: building with -fsanitize=thread in $work/src"
# without UCX, whose memory hooks (libucm) run inside the sanitizer's own thread start-up, and
# without libfabric and verbs: the tests here run over shm and tcp
top_srcdir=$s "${SHELL:-/bin/sh}" "$s/tests/sanitize/tree.sh" "$work" "${TSAN_CC:-cc}" \
    "-O1 -g -fno-omit-frame-pointer -fsanitize=thread" "-fsanitize=thread" \
    --without-torch --without-mpi --without-openblas --without-cuda --without-ucx \
    --without-ofi --without-verbs || exit 1
# the programs the tests run, not every check program
progs="tools/meshrun tools/mesh-info"
for t in $tests; do
    case $t in
    *.sh) p=$(sed -n 's|.*\$b/\(tests/[a-z_/]*\).*|\1|p' "$s/$t" | sort -u) ;;
    *) p=$t ;;
    esac
    progs="$progs $p"
done
progs="$progs nccl/libnccl.la"
# only what this configuration builds (nccl_abi_preload needs NVIDIA's library)
have=
for p in $progs; do
    make -C "$work/src" -n "$p" >/dev/null 2>&1 && have="$have $p"
done
progs=$have
if ! make -C "$work/src" -j"${TSAN_JOBS:-2}" $progs >"$work/build.log" 2>&1; then
    tail -n 40 "$work/build.log"
    exit 1
fi
# halt at the first report: a race fails the test instead of scrolling past
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1 second_deadlock_stack=1}
export MESH_TEST_SANITIZED=1
status=0
for t in $tests; do
    log=$work/$(echo "$t" | tr / _).log
    case $t in
    *.sh) (cd "$work/src" && top_srcdir=. top_builddir=. "${SHELL:-/bin/sh}" "$t") >"$log" 2>&1 ;;
    *) (cd "$work/src" && "./$t") >"$log" 2>&1 ;;
    esac
    rc=$?
    races=$(grep -c 'WARNING: ThreadSanitizer' "$log")
    if [ $rc -eq 0 ] && [ "$races" -eq 0 ]; then
        echo "PASS: $t"
    elif [ $rc -eq 77 ]; then
        echo "SKIP: $t"
    else
        echo "FAIL: $t (exit $rc, $races report(s); $log)"
        grep -A 30 'WARNING: ThreadSanitizer' "$log" | head -n 60
        status=1
    fi
done
exit $status
