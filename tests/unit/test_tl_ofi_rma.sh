#!/bin/sh
# Put and get over the ofi transport on every libfabric provider here that offers RMA with
# virtual addresses (tcp, shm); skips (77) when none does.
b=${top_builddir:-.}
[ -x "$b/tests/unit/test_tl_ofi_rma" ] || { echo "built without libfabric"; exit 77; }
command -v fi_info >/dev/null 2>&1 || { echo "fi_info not found"; exit 77; }
ran=0
for prov in tcp shm; do
    fi_info -p "$prov" -t FI_EP_RDM >/dev/null 2>&1 || continue
    FI_PROVIDER=$prov "$b/tests/unit/test_tl_ofi_rma"
    rc=$?
    [ $rc -eq 77 ] && continue
    [ $rc -eq 0 ] || exit 1
    ran=1
done
[ $ran -eq 1 ] || exit 77
