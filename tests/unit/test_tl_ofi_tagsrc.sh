#!/bin/sh
# ofi transport tests with the source rank carried in the tag bits instead of directed receives
# (the path providers without FI_DIRECTED_RECV take), on the tcp provider.
MESH_OFI_DIRECTED=no exec "${top_srcdir:-.}/tests/unit/tl_ofi.sh" tcp 0
