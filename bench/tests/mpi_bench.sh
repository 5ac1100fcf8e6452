#!/bin/sh
# mpi-bench runs and validates the same ops under mpirun (skipped when MPI was not found).
top_builddir=${top_builddir:-.}
MPIBENCH="$top_builddir/bench/mpi/mpi-bench"
[ -x "$MPIBENCH" ] && command -v mpirun >/dev/null || { echo "skip: no mpi-bench"; exit 77; }
flags="-np 2 --bind-to none"
[ "$(id -u)" = 0 ] && flags="$flags --allow-run-as-root --oversubscribe"
out=$(mktemp) || exit 99
trap 'rm -f "$out"' EXIT
# shellcheck disable=SC2086
mpirun $flags "$MPIBENCH" -o all -d fp32,int8 -r sum,max -b 8 -e 64k -f 16 -n 2 -w 1 -c 1 \
    >"$out" 2>&1
rc=$?
if [ $rc != 0 ] || ! grep -q '^# wrong elements: 0 OK' "$out"; then
    cat "$out"
    echo "FAIL: mpi-bench exited with $rc"
    exit 1
fi
echo "ok: mpi-bench validated every op on 2 ranks"
