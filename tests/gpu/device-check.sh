#!/bin/sh
# The check of the GPU path on a machine with a GPU (and its CUDA driver; no network needed).
#
#   tests/gpu/device-check.sh                    build if needed, run the GPU suite
#   TESTS='tests/unit/foo tests/mp/bar.sh' tests/gpu/device-check.sh     ... and these too
#
# Builds the tree when it is not built (./autogen.sh && ./configure && make), runs each check
# with a time limit, prints one line per check (PASS, FAIL, SKIP, TIME) and a summary line, and
# exits 0 only when no check failed. The whole run stays within DEVICE_CHECK_BUDGET seconds
# (default 480): checks that would start after it are reported as not run, and fail the run.
#
# Knobs: DEVICE_CHECK_JOBS (make -j, default 16), DEVICE_CHECK_TIMEOUT (seconds per check,
# default 150), DEVICE_CHECK_LOGS (folder of the logs, default device-check-logs),
# DEVICE_CHECK_SANITIZER=1 (also the table's test under compute-sanitizer),
# DEVICE_CHECK_PREBUILT=1 (run the programs there are, build nothing), CONFIGURE_FLAGS,
# DEVICE_CHECK_ONLY (names of the checks to run, e.g. "nccl_cuda torch_check"; default all),
# DEVICE_CHECK_TORCH_TIMEOUT (seconds of torch_check, default 300).
#
# To add a check, append a line to the list in checks() below: a name, then the command (its
# programs under tests/ are built first). On a machine with a GPU (nvidia-smi lists one), a check
# of that list that skips (77) counts as failed; tests given in TESTS may skip.
set -u
cd "$(dirname "$0")/../.." || exit 1
top=$(pwd)
jobs=${DEVICE_CHECK_JOBS:-16}
per=${DEVICE_CHECK_TIMEOUT:-150}
budget=${DEVICE_CHECK_BUDGET:-480}
logs=${DEVICE_CHECK_LOGS:-$top/device-check-logs}
start=$(date +%s)
mkdir -p "$logs" || exit 1

elapsed() { echo $(($(date +%s) - start)); }

# The checks: "name command...", one per line. conf_dev_*: every collective on device buffers
# of the GPU (tests/mp/conformance -D, all ranks on the one device), as
# tests/gpu/emu_conformance.sh runs them on the emulated device (all-gather, broadcast and
# all-reduce by device copies between IPC mappings, the others staged). ipc_*: those three by
# IPC, counted, with the mapping cache's hits and a buffer reallocated at the same address
# (tests/gpu/dev_ipc.c, as tests/gpu/emu_ipc.sh runs it), and staged with MESH_DEVICE_IPC=0.
# hier_NxL: all-reduce, all-gather, broadcast and reduce-scatter on N simulated nodes of L ranks
# by IPC inside the nodes and pinned host memory on the rails, counted, exact (tests/gpu/dev_hier.c,
# as tests/gpu/emu_hier.sh runs it).
# bench_gpu_K: mesh-bench -m cuda with K ranks on the GPU (allgather, broadcast, allreduce up
# to 256 MiB, the device's copy rate as the bound, 8-byte allreduce latency); its last line,
# printed here, has the ratios.
# nccl_cuda: mesh's libnccl.so.2 on cuMemAlloc buffers and CUDA streams, 2 and 4 ranks on the GPU.
# torch_check: PyTorch's ProcessGroupNCCL with mesh's libnccl.so.2 preloaded (collectives = gloo,
# DDP and FSDP2 = one process; python3's torch), and the NCCL calls mesh did not serve.
checks() {
    cat <<EOF
cuda_arith tests/gpu/test_cuda_arith
cuda_ops tests/gpu/test_cuda_ops
cuda_ops_hostfn env MESH_CUDA_MEMOPS=no tests/gpu/test_cuda_ops
cuda_ipc tests/gpu/test_cuda_ipc
conf_dev_2 sh tests/gpu/each_collective.sh -n 2 tests/mp/conformance -D -q
conf_dev_4 sh tests/gpu/each_collective.sh -n 4 tests/mp/conformance -D -q -s
conf_dev_8 sh tests/gpu/each_collective.sh -n 8 tests/mp/conformance -D -q -s
conf_dev_3_req sh tests/gpu/each_collective.sh -n 3 tests/mp/conformance -D -q -s -R
ipc_2 tools/meshrun -n 2 --timeout 120 tests/gpu/dev_ipc ipc
ipc_4 tools/meshrun -n 4 --timeout 120 tests/gpu/dev_ipc ipc
ipc_8 tools/meshrun -n 8 --timeout 120 tests/gpu/dev_ipc ipc
ipc_4_staged env MESH_DEVICE_IPC=0 tools/meshrun -n 4 --timeout 120 tests/gpu/dev_ipc staged
hier_2x2 tools/meshrun -n 4 --nodes 2 --timeout 120 tests/gpu/dev_hier hier
hier_2x4 tools/meshrun -n 8 --nodes 2 --timeout 120 tests/gpu/dev_hier hier
nccl_cuda tests/gpu/nccl_cuda 2 4
torch_check sh tests/gpu/torch-check.sh
bench_gpu_2 sh tests/gpu/bench_gpu.sh 2
bench_gpu_4 sh tests/gpu/bench_gpu.sh 4
bench_gpu_8 sh tests/gpu/bench_gpu.sh 8
EOF
    if [ "${DEVICE_CHECK_SANITIZER:-0}" = 1 ] && command -v compute-sanitizer >/dev/null; then
        echo "cuda_ops_memcheck compute-sanitizer --error-exitcode 1 tests/gpu/test_cuda_ops"
    fi
    for t in ${TESTS:-}; do
        case $t in
        *.sh) echo "$(basename "$t" .sh) sh $t" ;;
        *) echo "$(basename "$t") $t" ;;
        esac
    done
}

# The programs the checks need (make targets).
programs() {
    checks | while read -r name cmd; do
        for w in $cmd; do
            case $w in tests/*.sh) ;; tests/*) echo "$w" ;; esac
        done
    done | sort -u
}

echo "device-check: $(uname -n), $(nproc) cores, budget ${budget}s"
# With a GPU in sight, a GPU check that skips (77) has failed: it found no device to test.
gpu=0
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 |
        sed 's/^/device-check: gpu: /'
    nvidia-smi -L 2>/dev/null | grep -q '^GPU' && gpu=1
else
    echo "device-check: no nvidia-smi: skips count as skips"
fi

# Build: configure once, then only what the checks run (and the library). With
# DEVICE_CHECK_PREBUILT=1 the programs built elsewhere and carried here run as they are (a
# machine without nvcc or autotools: carry tests/gpu, whose test programs hold the library).
if [ "${DEVICE_CHECK_PREBUILT:-0}" = 1 ]; then
    echo "device-check: prebuilt programs, no build"
elif [ ! -f Makefile ] && [ ! -x configure ] && ! command -v autoreconf >/dev/null; then
    echo "device-check: FAIL: no configure and no autotools here: run ./autogen.sh where they" \
        "are and carry configure and the Makefile.in files, or build there and carry tests/gpu" \
        "with DEVICE_CHECK_PREBUILT=1"
    exit 1
elif [ ! -f Makefile ]; then
    echo "device-check: configuring (log: $logs/build.log)"
    { [ -x configure ] || ./autogen.sh; } >"$logs/build.log" 2>&1 &&
        ./configure ${CONFIGURE_FLAGS:-} >>"$logs/build.log" 2>&1 ||
        { tail -30 "$logs/build.log"; echo "device-check: FAIL configure"; exit 1; }
fi
if [ "${DEVICE_CHECK_PREBUILT:-0}" != 1 ]; then
    grep -q '^#define HAVE_CUDA 1' config.h ||
        echo "device-check: warning: configured without CUDA (no nvcc?): the GPU checks skip"
    echo "device-check: building (make -j$jobs; log: $logs/build.log)"
    if ! make -j"$jobs" all $(programs) >>"$logs/build.log" 2>&1; then
        tail -30 "$logs/build.log"
        echo "device-check: FAIL build ($(elapsed)s)"
        exit 1
    fi
    echo "device-check: built in $(elapsed)s"
fi

pass=0 fail=0 skip=0 notrun=0
export top_srcdir="$top" top_builddir="$top"
tmp=$(mktemp) || exit 1
if [ -n "${DEVICE_CHECK_ONLY:-}" ]; then
    checks | while read -r name cmd; do
        case " $DEVICE_CHECK_ONLY " in *" $name "*) echo "$name $cmd" ;; esac
    done >"$tmp"
else
    checks >"$tmp"
fi
while read -r name cmd; do
    left=$((budget - $(elapsed)))
    if [ "$left" -le 5 ]; then
        echo "NOTRUN $name (budget spent)"
        notrun=$((notrun + 1))
        continue
    fi
    lim=$per
    [ "$name" = torch_check ] && lim=${DEVICE_CHECK_TORCH_TIMEOUT:-300}
    [ "$left" -lt "$lim" ] && lim=$left
    t0=$(date +%s)
    timeout -k 5 "$lim" $cmd >"$logs/$name.log" 2>&1
    rc=$?
    dt=$(($(date +%s) - t0))
    case $rc in
    0) st=PASS; pass=$((pass + 1)) ;;
    77)
        case " ${TESTS:-} " in
        *" $name "* | *"/$name "* | *"/$name.sh "*) gpu_check=0 ;;
        *) gpu_check=$gpu ;;
        esac
        if [ "$gpu_check" = 1 ]; then
            st=FAIL; fail=$((fail + 1))
        else
            st=SKIP; skip=$((skip + 1))
        fi ;;
    124 | 137) st=TIME; fail=$((fail + 1)) ;;
    *) st=FAIL; fail=$((fail + 1)) ;;
    esac
    last=$(grep -v '^$' "$logs/$name.log" | tail -1 | cut -c1-120)
    [ $rc = 77 ] && [ $st = FAIL ] && last="skipped with a GPU present: $last"
    echo "$st $name (${dt}s, rc $rc): $last"
    [ "$st" = FAIL ] || [ "$st" = TIME ] && tail -15 "$logs/$name.log" | sed 's/^/    /'
done <"$tmp"
rm -f "$tmp"
echo "device-check: summary: $pass passed, $fail failed, $skip skipped, $notrun not run" \
    "in $(elapsed)s (logs: $logs)"
[ "$fail" -eq 0 ] && [ "$notrun" -eq 0 ]
