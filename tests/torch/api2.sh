#!/bin/sh
# torch 2.x's DeviceMesh, DTensor, FSDP2, pipelining, uneven all_to_all_single and
# batch_isend_irecv against gloo, on 4 ranks in 2 simulated nodes (skips on torch 1.x).
. "${top_srcdir:-.}/tests/torch/torch_lib.sh"
set -e
if ! "$py" -c 'import sys, torch; sys.exit(int(torch.__version__.split(".")[0]) < 2)'; then
    echo "skipped: the torch of $py is 1.x"
    exit 77
fi
torch_ranks 4 --nodes 2 "$py" "$s/tests/torch/api2.py"
