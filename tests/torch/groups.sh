#!/bin/sh
# Subgroups and asynchronous operations on 3 ranks of one node and on 2 simulated nodes x 2.
. "${top_srcdir:-.}/tests/torch/torch_lib.sh"
set -e
torch_ranks 3 "$py" "$s/tests/torch/groups.py"
torch_ranks 4 --nodes 2 "$py" "$s/tests/torch/groups.py"
