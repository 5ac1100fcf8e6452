#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine and builds mesh, then runs one of:
#   ./quickstart.sh bench   the main job: mesh-bench over every collective on 4 ranks in
#                           2 simulated nodes (network namespaces when run as root)
#   ./quickstart.sh test    make check
# Idempotent: packages, configure and the build are only redone when missing or stale.
set -euo pipefail
cd "$(dirname "$0")"

job=${1:-}
case "$job" in
bench|test) ;;
*) echo "usage: $0 bench|test" >&2; exit 2 ;;
esac

packages="build-essential autoconf automake libtool pkg-config libhwloc-dev hwloc
          openmpi-bin libopenmpi-dev libpmix-dev iperf3 iproute2 gnuplot-nox procps"
# libfabric for the ofi transport (fi_info for its tests)
packages="$packages libfabric-dev libfabric-bin"
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

if [ ! -x configure ] || [ configure.ac -nt configure ]; then ./autogen.sh; fi
if [ ! -f Makefile ] || [ configure -nt Makefile ]; then ./configure ${MESH_CONFIGURE_FLAGS:-}; fi
make -j"$(nproc)"

case "$job" in
bench)
    exec tools/meshrun -n 4 --nodes 2 --timeout 1200 bench/mesh-bench -o all -b 8 -e 64m -f 4 \
        --csv mesh-bench.csv
    ;;
test)
    exec make -j"$(nproc)" check
    ;;
esac
