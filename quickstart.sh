#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine and builds mesh, then runs one of:
#   ./quickstart.sh bench   the main job: mesh-bench per axis of a tp=2,dp=2,pp=2 mesh on
#                           8 ranks in 2 simulated nodes (network namespaces when run as
#                           root); tables on stdout, CSV, JSON and one PNG per op in
#                           bench-results/ (or the folder given after "bench")
#   ./quickstart.sh test    make check, the PyTorch backend's tests on the pinned PyTorch 2.x
#                           that python/setup-torch.sh installs from PyPI into a virtual
#                           environment (~/.cache/mesh/torch-VERSION, $MESH_TORCH_VENV)
# Idempotent: packages, configure and the build are only redone when missing or stale.
set -euo pipefail
cd "$(dirname "$0")"

job=${1:-}
case "$job" in
bench|test) ;;
*) echo "usage: $0 bench [DIR]|test" >&2; exit 2 ;;
esac

packages="build-essential autoconf automake libtool pkg-config libhwloc-dev hwloc
          openmpi-bin libopenmpi-dev libpmix-dev iperf3 iproute2 gnuplot-nox procps"
packages="$packages libibverbs-dev" # the verbs transport builds without a device present
packages="$packages libucx-dev" # the ucx transport
# libfabric for the ofi transport (fi_info for its tests)
packages="$packages libfabric-dev libfabric-bin"
# a static busybox: the guest of make check-softroce, whose image make check prepares
packages="$packages busybox-static"
packages="$packages libopenblas-dev" # sgemm for bench/mesh-train
packages="$packages clang-format" # make check holds the sources to .clang-format
# the PyTorch backend (python/): Debian's torch 1.13 (CPU), its C++ headers and pybind11
packages="$packages python3-torch libtorch-dev pybind11-dev"
# PyTorch 2.x from PyPI, in a virtual environment, for the test job
packages="$packages python3-venv python3-dev"
missing=""
for p in $packages; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "quickstart: installing$missing"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing
fi

flags=${MESH_CONFIGURE_FLAGS:-}
torch_py=""
# the backend's tests run on PyTorch 2.x, unless the flags name a torch (the bench job leaves
# configure to find one: Debian's 1.13)
case "$job $flags" in
test*--with*torch*|bench*) ;;
test*)
    torch_py=$(python/setup-torch.sh | tail -n 1)
    flags="--with-torch=$torch_py $flags"
    ;;
esac
if [ ! -x configure ] || [ configure.ac -nt configure ]; then ./autogen.sh; fi
if [ ! -f Makefile ] || [ configure -nt Makefile ] ||
    { [ -n "$torch_py" ] && ! grep -qx "TORCH_PYTHON = $torch_py" Makefile; }; then
    ./configure $flags
fi
make -j"$(nproc)"

case "$job" in
bench)
    out=${2:-bench-results}
    mkdir -p "$out"
    # every group of an axis runs at once; pp runs sendrecv alone, between neighbouring stages;
    # sendrecv on tp and dp too puts shared memory and TCP on one plot
    tools/meshrun -n 8 --nodes 2 --timeout 1200 bench/mesh-bench --mesh tp=2,dp=2,pp=2 \
        --axes all -o allreduce,reduce_scatter,allgather,alltoall,sendrecv \
        -b 512 -e 8m -f 4 -n 5 -w 2 --csv "$out/mesh-bench.csv" \
        --json "$out/mesh-bench.json" --plot "$out" | tee "$out/mesh-bench.txt"
    echo "quickstart: tables, CSV, JSON and plots in $out/"
    ;;
test)
    exec make -j"$(nproc)" check
    ;;
esac
