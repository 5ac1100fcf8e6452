#!/bin/sh
# ofi transport tests on libfabric's shm provider.
exec "${top_srcdir:-.}/tests/unit/tl_ofi.sh" shm 0 bw
