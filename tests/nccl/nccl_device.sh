#!/bin/sh
# NCCL's API on device buffers of the emulated device, 2 and 4 processes: every collective with
# exact results, stream ordering (a call returns before its held stream ran it), the device of
# the communicator (not device 0: MESH_DEVICE_EMU_DEVICE=1) and another device's buffer refused.
# With MESH_NCCL_REPORT=1 every process reports at exit the unserved entry point the program
# calls (ncclDevCommCreate) and the three failures it provokes.
b=${top_builddir:-.}
export MESH_TIMEOUT=${MESH_TIMEOUT:-60}
# the test provokes argument errors on purpose: keep their messages out of the log
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
export MESH_DEVICE_EMU=1 MESH_DEVICE_EMU_DEVICE=1 MESH_DEVICE_EMU_DELAY_US=${MESH_DEVICE_EMU_DELAY_US:-20}
export MESH_NCCL_REPORT=1
err=$(mktemp) || exit 1
trap 'rm -f "$err"' EXIT
"$b/tests/nccl/nccl_device_emu" 2 4 2>"$err"
rc=$?
grep -v '^mesh libnccl.so.2 report\|^  unserved\|^  failed' "$err" >&2
[ $rc = 0 ] || exit $rc
n=$(grep -c 'report (pid [0-9]*): 1 entry point(s) called that mesh does not serve:' "$err")
u=$(grep -c '^  unserved ncclDevCommCreate: 1 call(s)$' "$err")
f=$(grep -c 'report (pid [0-9]*): 3 distinct failure(s):' "$err")
if [ "$n" != 6 ] || [ "$u" != 6 ] || [ "$f" != 6 ]; then
    echo "MESH_NCCL_REPORT: expected 6 reports of 1 unserved call and 3 failures, got $n, $u, $f:"
    grep '^mesh libnccl.so.2 report\|^  unserved\|^  failed' "$err"
    exit 1
fi
echo "MESH_NCCL_REPORT: each of the 6 processes reported ncclDevCommCreate and its 3 failures (2 refusals, the unserved call):"
grep -m 3 '^mesh libnccl.so.2 report\|^  unserved\|^  failed' "$err"
