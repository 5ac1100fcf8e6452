#!/bin/sh
# PMIx bootstrap under Open MPI's mpirun (which serves PMIx to any program it starts).
# Skips (77) without PMIx support in the build or without mpirun.
bin=${top_builddir:-.}/tests/unit/test_bootstrap_pmix
"$bin" --probe || exit $?
command -v mpirun >/dev/null 2>&1 || { echo "no mpirun: skipped"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset MESH_RANK MESH_SIZE MESH_ADDR RANK WORLD_SIZE MASTER_ADDR MASTER_PORT
for n in 1 2 3 5 8; do
    out=$(timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none \
          -np $n "$bin" $n 2>&1)
    rc=$?
    echo "$out"
    if [ $rc -ne 0 ]; then
        echo "FAIL: mpirun -np $n exited with $rc"
        exit 1
    fi
    got=$(echo "$out" | grep -c '^ok pmix rank')
    if [ "$got" -ne $n ]; then
        echo "FAIL: mpirun -np $n: $got of $n ranks reported ok"
        exit 1
    fi
done
exit 0
