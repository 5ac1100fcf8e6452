#!/bin/sh
# DDP against gloo: 4 ranks started by torchrun, then 2 ranks on each of 2 simulated nodes.
# torchrun runs through the interpreter that has torch; Debian's 1.13 needs --redirects 1
# --tee 1 on Python 3.11 (its defaults fail there).
. "${top_srcdir:-.}/tests/torch/torch_lib.sh"
set -e
"$py" -m torch.distributed.run --standalone --redirects 1 --tee 1 --nproc_per_node 4 \
    "$s/tests/torch/ddp.py"
torch_ranks 4 --nodes 2 "$py" "$s/tests/torch/ddp.py"
