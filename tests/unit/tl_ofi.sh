#!/bin/sh
# The transport conformance test (and, with a third argument, the bandwidth test) over the ofi
# transport on one libfabric provider. Skips (77) without libfabric or the provider.
# usage: tl_ofi.sh PROVIDER [MESH_OFI_MAX_MSG] [bw]
b=${top_builddir:-.}
prov=$1
grep -q '^#define HAVE_OFI 1' "$b/config.h" 2>/dev/null || { echo "built without libfabric"; exit 77; }
command -v fi_info >/dev/null 2>&1 || { echo "fi_info not found"; exit 77; }
if ! fi_info -p "$prov" -t FI_EP_RDM >/dev/null 2>&1; then
    echo "libfabric provider $prov absent"
    exit 77
fi
export FI_PROVIDER=$prov
[ "${2:-0}" = 0 ] || export MESH_OFI_MAX_MSG=$2
"$b/tests/unit/test_tl" ofi || exit 1
if [ "${3:-}" = bw ]; then
    "$b/tests/unit/test_tl_bw" ofi $((8 << 20)) 8 || exit 1
fi
exit 0
