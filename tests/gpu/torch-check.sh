#!/bin/sh
# PyTorch's own ProcessGroupNCCL on mesh's libnccl.so.2, on the GPU machine (a few minutes):
# the library preloaded (torch links NVIDIA's libnccl.so.2 through an RPATH, which LD_LIBRARY_PATH
# cannot override; a preloaded library with the same SONAME takes its place), every rank on
# GPU 0 under torchrun:
#   collectives on 2 ranks     every torch.distributed collective on CUDA tensors = gloo's
#   train on 2 and 4 ranks     DDP and FSDP2 of a small transformer, 20 steps = one process
# then the summary of MESH_NCCL_REPORT: the NCCL entry points torch called that mesh does not
# serve, and the failures its calls met (there must be none).
#
# TORCH_CHECK_PYTHON: the interpreter with torch (default python3). TORCH_CHECK_CPU=1: gloo on
# CPU tensors in place of NCCL (no GPU, no preload), to check the script itself. Exits 77
# without torch or without a GPU that torch can use.
set -u
b=${top_builddir:-.}
s=${top_srcdir:-.}
py=${TORCH_CHECK_PYTHON:-python3}
cpu=${TORCH_CHECK_CPU:-0}
limit=${TORCH_CHECK_TIMEOUT:-100} # seconds per torchrun
if ! "$py" -c 'import torch' 2>/dev/null; then
    echo "skipped: no torch in $py"
    exit 77
fi
export OMP_NUM_THREADS=1 MESH_TIMEOUT=${MESH_TIMEOUT:-60} MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
# one machine, which may have no network: gloo (the reference) on loopback
export GLOO_SOCKET_IFNAME=${GLOO_SOCKET_IFNAME:-lo}
args=
if [ "$cpu" = 1 ]; then
    args=--cpu
else
    if ! "$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
        echo "skipped: torch.cuda.is_available() is false"
        exit 77
    fi
    lib=$(cd "$b/nccl/.libs" 2>/dev/null && pwd)/libnccl.so.2
    [ -f "$lib" ] || { echo "FAIL: $lib is not built"; exit 1; }
    case $lib in *" "*) echo "FAIL: LD_PRELOAD cannot name $lib (a space)"; exit 1 ;; esac
    export LD_PRELOAD=$lib MESH_NCCL_LIB=$lib MESH_NCCL_REPORT=1
    # NVIDIA's checks that mesh does not need (several ranks on one GPU are fine here)
    export TORCH_NCCL_ASYNC_ERROR_HANDLING=${TORCH_NCCL_ASYNC_ERROR_HANDLING:-1}
fi
"$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
log=$(mktemp) || exit 1
trap 'rm -f "$log"' EXIT
fail=0
run() {
    n=$1 mode=$2
    echo "== torchrun: $n ranks, $mode"
    timeout -k 10 "$limit" "$py" -m torch.distributed.run --standalone --nproc_per_node "$n" \
        "$s/tests/gpu/torch_check.py" "$mode" $args >"$log" 2>&1
    rc=$?
    grep -v '^mesh libnccl.so.2 report\|^  unserved\|^  failed' "$log" | tail -40
    grep -h '^mesh libnccl.so.2 report\|^  unserved\|^  failed' "$log" >>"$log.report"
    case $rc in
    0) ;;
    124 | 137) echo "TIME torchrun $n ranks $mode: over ${limit}s"; fail=1 ;;
    *) echo "FAIL torchrun $n ranks $mode: rc $rc"; fail=1 ;;
    esac
}
: >"$log.report"
run 2 collectives
run 2 train
run 4 train
if [ "$cpu" != 1 ]; then
    echo "== NCCL entry points torch called that mesh does not serve, and failed calls:"
    unserved=$(grep -h '^  unserved' "$log.report" | sort | uniq -c)
    failed=$(grep -h '^  failed' "$log.report" | sort | uniq -c)
    nreports=$(grep -c 'entry point' "$log.report")
    echo "${unserved:-  none} (reports of $nreports processes)"
    [ -n "$failed" ] && echo "$failed"
    [ "$nreports" -gt 0 ] || { echo "FAIL: no process printed its report"; fail=1; }
    [ -z "$unserved" ] || fail=1
fi
rm -f "$log.report"
[ $fail = 0 ] && echo "torch-check: all passed" || echo "torch-check: FAILED"
exit $fail
