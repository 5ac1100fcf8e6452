#!/bin/sh
# PyTorch's distributed_test.py on the mesh backend (make check-torch-suite), on the torch of the
# interpreter configure was given (TORCH_PYTHON): the tests listed in dist_suite.list, or with
# DIST_SUITE_ALL=1 (or without the list) every test of the suite (those for gloo, nccl or GPUs
# skip themselves). The log of each run is dist_suite.log in the build tree.
. "${top_srcdir:-.}/tests/torch/torch_lib.sh"
list="$s/tests/torch/dist_suite.list"
if [ "${DIST_SUITE_ALL:-0}" = 1 ] || [ ! -f "$list" ]; then
    set --
else
    set -- --tests "$list"
fi
"$py" "$s/tests/torch/dist_suite.py" "$@" --out dist_suite.passed
