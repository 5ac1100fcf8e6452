#!/bin/sh
# Dead and silent peers, Work.wait timeouts, re-initialisation and exits (fault.py starts and
# watches its own processes).
. "${top_srcdir:-.}/tests/torch/torch_lib.sh"
exec "$py" "$s/tests/torch/fault.py"
