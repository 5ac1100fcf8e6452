#!/bin/sh
# How libmesh loads the CUDA driver, on any machine: against a stand-in driver with no device
# (tests/gpu/fake_cuda.c), the CUDA table asks cuGetProcAddress_v2 for every entry point by its
# base name (cuMemAlloc, not cuMemAlloc_v2) at the CUDA 12.0 ABI with legacy-stream semantics,
# then refuses with the reason (no device; a missing entry point named; a driver older than
# 12.0; a library that is no CUDA driver), exiting the table's test with 77 each time.
set -u
b=${top_builddir:-.}
fake=$b/tests/gpu/.libs/libfake_cuda.so
ops=$b/tests/gpu/test_cuda_ops
[ -f "$fake" ] || { echo "skip: no stand-in driver (built without CUDA)"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; cat "$tmp/out"; exit 1; }

# $1: what the skip message must say; the rest: environment
expect_skip() {
    want=$1
    shift
    env "$@" MESH_CUDA_DRIVER="$fake" FAKE_CUDA_LOG="$tmp/log" "$ops" >"$tmp/out" 2>&1
    rc=$?
    [ $rc -eq 77 ] || fail "exit $rc, not 77 ($*)"
    grep -q "$want" "$tmp/out" || fail "no '$want' in the skip message ($*)"
    echo "ok: $want"
}

expect_skip "sees no device"
n=$(wc -l <"$tmp/log")
[ "$n" -ge 40 ] || fail "only $n entry points asked for"
# base names only, each once, at 12000 with CU_GET_PROC_ADDRESS_LEGACY_STREAM (1)
grep -v ' 12000 1$' "$tmp/log" && fail "an entry point asked for at another version or flags"
grep -E '_v[0-9]+ |_ptsz |_ptds ' "$tmp/log" && fail "a versioned name asked for"
[ "$(cut -d' ' -f1 "$tmp/log" | sort | uniq -d)" = "" ] || fail "a name asked for twice"
for s in cuMemAlloc cuStreamWriteValue32 cuStreamWaitValue32 cuIpcOpenMemHandle cuMemMap \
    cuPointerGetAttributes cuLaunchKernel cuModuleLoadData; do
    grep -q "^$s " "$tmp/log" || fail "$s never asked for"
done
echo "ok: $n entry points by base name at 12000, legacy streams"
rm -f "$tmp/log"
expect_skip "has no cuMemMap" FAKE_CUDA_MISSING=cuMemMap
expect_skip "supports CUDA 11.8; 12.0 needed" FAKE_CUDA_VERSION=11080
env MESH_CUDA_DRIVER=libc.so.6 "$ops" >"$tmp/out" 2>&1
[ $? -eq 77 ] && grep -q "older than CUDA 12.0" "$tmp/out" || fail "libc taken for a driver"
echo "ok: a library without cuGetProcAddress_v2 refused"
env MESH_CUDA_DRIVER="$tmp/none.so" "$ops" >"$tmp/out" 2>&1
[ $? -eq 77 ] && grep -q "no CUDA driver: dlopen" "$tmp/out" || fail "a missing driver"
echo "ok: no driver"
