#!/bin/sh
# Every operation x element type x size against gloo: 2 ranks with the 16 MiB size, 3 ranks (an
# odd count) and 4 ranks on 2 simulated nodes (TCP between them) with the small sizes.
. "${top_srcdir:-.}/tests/torch/torch_lib.sh"
set -e
torch_ranks 2 "$py" "$s/tests/torch/ops.py"
torch_ranks 3 "$py" "$s/tests/torch/ops.py" --big 0
torch_ranks 4 --nodes 2 "$py" "$s/tests/torch/ops.py" --big 0
