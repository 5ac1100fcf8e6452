#!/bin/sh
# A rank killed with SIGKILL mid-collective over the ofi transport (libfabric's tcp provider,
# then its shm provider): every survivor reports it, naming the dead rank. Skips (77) without
# libfabric or its tcp provider.
set -e
b=${top_builddir:-.}
grep -q '^#define HAVE_OFI 1' "$b/config.h" 2>/dev/null || { echo "built without libfabric"; exit 77; }
command -v fi_info >/dev/null 2>&1 || { echo "fi_info not found"; exit 77; }
fi_info -p tcp -t FI_EP_RDM >/dev/null 2>&1 || { echo "libfabric provider tcp absent"; exit 77; }
export MESH_TIMEOUT=10
FI_PROVIDER=tcp "$b/tests/mp/fault" 4 self,ofi
FI_PROVIDER=tcp MESH_TIMEOUT=2 "$b/tests/mp/fault" 3 self,ofi stop
if fi_info -p shm -t FI_EP_RDM >/dev/null 2>&1; then
    FI_PROVIDER=shm "$b/tests/mp/fault" 3 self,ofi
fi
