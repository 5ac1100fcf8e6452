#!/bin/sh
# ofi transport tests with messages larger than a 64 KiB provider limit, sent in pieces.
exec "${top_srcdir:-.}/tests/unit/tl_ofi.sh" tcp 65536
