#!/bin/sh
# ofi transport tests on libfabric's tcp provider (tcp;ofi_rxm).
exec "${top_srcdir:-.}/tests/unit/tl_ofi.sh" tcp 0 bw
