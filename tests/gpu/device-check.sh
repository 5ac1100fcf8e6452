#!/bin/sh
# The check of the GPU path on a machine with a GPU (and its CUDA driver; no network needed).
#
#   tests/gpu/device-check.sh                    build if needed, run the GPU suite
#   TESTS='tests/unit/foo tests/mp/bar.sh' tests/gpu/device-check.sh     ... and these too
#
# Builds the tree when it is not built (./autogen.sh && ./configure && make), runs each check
# with its time limit, prints one line per check (PASS, FAIL, SKIP, TIME) and a summary line, and
# exits 0 only when no check failed. The whole run stays within DEVICE_CHECK_BUDGET seconds
# (default 480, the build included): checks that would start after it are reported as not run,
# and fail the run.
#
# Knobs: DEVICE_CHECK_JOBS (make -j, default 16), DEVICE_CHECK_TIMEOUT (seconds of a check given
# in TESTS, default 150), DEVICE_CHECK_LOGS (folder of the logs, default device-check-logs),
# DEVICE_CHECK_SANITIZER=1 (also the table's test under compute-sanitizer),
# DEVICE_CHECK_PREBUILT=1 (run the programs there are, build nothing), CONFIGURE_FLAGS,
# DEVICE_CHECK_ONLY (names of the checks to run, e.g. "nccl_cuda torch_check"; default all),
# DEVICE_CHECK_TORCH_TIMEOUT (seconds of torch_check, default 300, the last check: it gets what
# is left of the budget), DEVICE_CHECK_BUILD_ONLY=1 (build, then stop: a later run's build is
# then a check that nothing changed, and its budget goes to the checks),
# DEVICE_CHECK_EMU=1 (the emulated device stands in for the GPU where the checks can take it:
# the conformance, bench, per-axis and NCCL runs; a check of this script on a machine without a
# GPU, with DEVICE_CHECK_ONLY naming those: the CUDA-only ones skip).
#
# To add a check, add a line to the list in checks() below: a name, its time limit in seconds,
# then the command (its programs under tests/ are built first). The limits are the budget of
# each step: a check over its limit is stopped and fails (TIME), so that it cannot take the
# time of those after it. On a machine with a GPU (nvidia-smi lists one), a check of that list
# that skips (77) counts as failed; tests given in TESTS may skip.
set -u
cd "$(dirname "$0")/../.." || exit 1
top=$(pwd)
jobs=${DEVICE_CHECK_JOBS:-16}
per=${DEVICE_CHECK_TIMEOUT:-150}
budget=${DEVICE_CHECK_BUDGET:-480}
logs=${DEVICE_CHECK_LOGS:-$top/device-check-logs}
start=$(date +%s)
mkdir -p "$logs" || exit 1
# the device of the checks that can take either: the GPU's cuda table, or the emulated one
mem=cuda axes_max=16m emu01=0
# axes_dev's script and grid: tp inside a node, dp and pp across nodes (8 ranks in 4 nodes)
axes=bench/tests/bench_device_axes.sh grid="tp=2,dp=2,pp=2 8 4 tp:1,dp:2,pp:2"
if [ "${DEVICE_CHECK_EMU:-0}" = 1 ]; then
    mem=emu axes_max=256k emu01=1
    export MESH_DEVICE_EMU=1 BENCH_GPU_MEM=emu BENCH_GPU_MAX=${BENCH_GPU_MAX:-16m}
    export BENCH_NODES_MIN=${BENCH_NODES_MIN:-4m} BENCH_NODES_MAX=${BENCH_NODES_MAX:-8m}
    export BENCH_NODES_RATIO=${BENCH_NODES_RATIO:-0}
fi

elapsed() { echo $(($(date +%s) - start)); }

# The checks: "name seconds command...", one per line, the seconds its limit. conf_dev_*: every
# collective on device buffers of the GPU (tests/mp/conformance -D, all ranks on the one device),
# as tests/gpu/emu_conformance.sh runs them on the emulated device (all-gather, broadcast and
# all-reduce by device copies between IPC mappings, the others staged); conf_dev_2x2 and
# conf_dev_2x4: the same with 2 and 4 ranks on each of 2 simulated nodes (network namespaces,
# tcp between them, device data staged through pinned host memory). ipc_*: those three by
# IPC, counted, with the mapping cache's hits and a buffer reallocated at the same address
# (tests/gpu/dev_ipc.c, as tests/gpu/emu_ipc.sh runs it), and staged with MESH_DEVICE_IPC=0.
# hier_NxL: all-reduce, all-gather, broadcast and reduce-scatter on N simulated nodes of L ranks
# by IPC inside the nodes and pinned host memory on the rails, counted, exact (tests/gpu/dev_hier.c,
# as tests/gpu/emu_hier.sh runs it). pipe_2x2: all-reduce, reduce and broadcast staged between 2
# simulated nodes in pipelined chunks, exact, the stages' overlap counted (tests/gpu/emu_pipe.sh).
# bench_nodes: device all-reduce between 2 nodes against mesh's host-buffer all-reduce between
# the same nodes, 64 to 256 MiB, the ratio printed and at least 0.85 (tests/gpu/bench_nodes.sh).
# axes_dev: mesh-bench's per-axis curves on device buffers, tp=2 inside a node, dp=2 and pp=2
# across 4 simulated nodes (8 ranks), the PNGs (or gnuplot scripts) and the CSV kept in the
# logs' folder axes_dev, and mesh-plan --calibrate reading it (bench/tests/bench_device_axes.sh).
# bench_gpu_K: mesh-bench -m cuda with K ranks on the GPU (allgather, broadcast, allreduce up
# to 256 MiB, the device's copy rate as the bound, 8-byte allreduce latency); its last line,
# printed here, has the ratios.
# nccl_cuda: mesh's libnccl.so.2 on cuMemAlloc buffers and CUDA streams, 2 and 4 ranks on the GPU;
# nccl_nodes: the same program as the ranks of 2 simulated nodes x 2 ranks.
# torch_check: PyTorch's ProcessGroupNCCL with mesh's libnccl.so.2 preloaded (collectives = gloo,
# DDP and FSDP2 = one process; python3's torch), and the NCCL calls mesh did not serve.
# The limits add up to more than the budget: they bound each step, the budget the whole run.
checks() {
    cat <<EOF
cuda_arith 20 tests/gpu/test_cuda_arith
cuda_ops 20 tests/gpu/test_cuda_ops
cuda_ops_hostfn 20 env MESH_CUDA_MEMOPS=no tests/gpu/test_cuda_ops
cuda_ipc 20 tests/gpu/test_cuda_ipc
conf_dev_2 60 sh tests/gpu/each_collective.sh -n 2 tests/mp/conformance -D -q
conf_dev_4 60 sh tests/gpu/each_collective.sh -n 4 tests/mp/conformance -D -q -s
conf_dev_8 80 sh tests/gpu/each_collective.sh -n 8 tests/mp/conformance -D -q -s
conf_dev_3_req 60 sh tests/gpu/each_collective.sh -n 3 tests/mp/conformance -D -q -s -R
conf_dev_2x2 60 sh tests/gpu/each_collective.sh -n 4 --nodes 2 tests/mp/conformance -D -q -s
conf_dev_2x4 80 sh tests/gpu/each_collective.sh -n 8 --nodes 2 tests/mp/conformance -D -q -s
ipc_2 20 tools/meshrun -n 2 --timeout 120 tests/gpu/dev_ipc ipc
ipc_4 20 tools/meshrun -n 4 --timeout 120 tests/gpu/dev_ipc ipc
ipc_8 30 tools/meshrun -n 8 --timeout 120 tests/gpu/dev_ipc ipc
ipc_4_staged 20 env MESH_DEVICE_IPC=0 tools/meshrun -n 4 --timeout 120 tests/gpu/dev_ipc staged
hier_2x2 30 tools/meshrun -n 4 --nodes 2 --timeout 120 tests/gpu/dev_hier hier
hier_2x4 40 tools/meshrun -n 8 --nodes 2 --timeout 120 tests/gpu/dev_hier hier
pipe_2x2 120 env MESH_DEVICE_EMU=$emu01 sh tests/gpu/emu_pipe.sh
bench_nodes 60 sh tests/gpu/bench_nodes.sh
axes_dev 60 env BENCH_AXES_OUT=$logs/axes_dev BENCH_AXES_MAX=$axes_max sh $axes $mem $grid
nccl_cuda 60 tests/gpu/nccl_cuda 2 4
nccl_nodes 60 sh tests/nccl/nccl_device_nodes.sh $mem
bench_gpu_2 40 sh tests/gpu/bench_gpu.sh 2
bench_gpu_4 40 sh tests/gpu/bench_gpu.sh 4
bench_gpu_8 50 sh tests/gpu/bench_gpu.sh 8
torch_check ${DEVICE_CHECK_TORCH_TIMEOUT:-300} sh tests/gpu/torch-check.sh
EOF
    if [ "${DEVICE_CHECK_SANITIZER:-0}" = 1 ] && command -v compute-sanitizer >/dev/null; then
        echo "cuda_ops_memcheck 120 compute-sanitizer --error-exitcode 1 tests/gpu/test_cuda_ops"
    fi
    for t in ${TESTS:-}; do
        case $t in
        *.sh) echo "$(basename "$t" .sh) $per sh $t" ;;
        *) echo "$(basename "$t") $per $t" ;;
        esac
    done
}

# The programs the checks need (make targets).
programs() {
    checks | while read -r name lim cmd; do
        for w in $cmd; do
            case $w in tests/*.sh) ;; tests/*) echo "$w" ;; esac
        done
    done | sort -u
    [ "$mem" = emu ] && echo tests/nccl/nccl_device_emu # nccl_nodes on the emulated device
    echo tests/gpu/emu_stream # pipe_2x2's stream checks
}

echo "device-check: $(uname -n), $(nproc) cores, budget ${budget}s"
[ "$mem" = emu ] && echo "device-check: DEVICE_CHECK_EMU=1: the emulated device stands in"
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
    [ "${DEVICE_CHECK_BUILD_ONLY:-0}" = 1 ] && exit 0
fi

pass=0 fail=0 skip=0 notrun=0
export top_srcdir="$top" top_builddir="$top"
tmp=$(mktemp) || exit 1
if [ -n "${DEVICE_CHECK_ONLY:-}" ]; then
    checks | while read -r name lim cmd; do
        case " $DEVICE_CHECK_ONLY " in *" $name "*) echo "$name $lim $cmd" ;; esac
    done >"$tmp"
else
    checks >"$tmp"
fi
echo "device-check: $(wc -l <"$tmp") checks, their limits $(awk '{ s += $2 } END { print s }' \
    "$tmp") s in all, $((budget - $(elapsed))) s of the budget left"
while read -r name lim cmd; do
    left=$((budget - $(elapsed)))
    if [ "$left" -le 5 ]; then
        echo "NOTRUN $name (budget spent)"
        notrun=$((notrun + 1))
        continue
    fi
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
