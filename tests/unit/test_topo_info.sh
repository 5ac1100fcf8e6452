#!/bin/sh
# mesh-info --topo on the fixtures: exact lines for GPUs, NICs and this process's choice, and a
# --dump that lstopo and MESH_TOPO_FILE read back.
set -e
b=${top_builddir:-.}
s=${top_srcdir:-.}
fx=$s/tests/fixtures/topo
export MESH_LOG_LEVEL=error
unset CUDA_VISIBLE_DEVICES MESH_LOCAL_GPU MESH_TOPO_FILE
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; cat "$tmp/out"; exit 1; }
has() { grep -qxF -- "$1" "$tmp/out" || fail "no line '$1'"; }

MESH_TOPO_FILE=$fx/dgx8.xml MESH_NODE_ID=sim0 MESH_LOCAL_RANK=13 \
    "$b/tools/mesh-info" --topo --dump "$tmp/dump.xml" >"$tmp/out"
has "node     : sim0"
has "packages : 2"
has "numa     : 2"
has "cores    : 32 (32 hardware threads, cpus 0-31)"
has "gpus     : 8"
has "  gpu 5  0000:a1:00.0  numa 1  cpus 16-31  nic mlx5_5 (4 hops)  NVIDIA H100 80GB HBM3"
has "nics     : 8"
has "  nic 2  mlx5_2       rdma 0000:32:00.0  numa 0  netdev ib2"
has "process  : gpu 5, cpus 16-31 (16), nic mlx5_5"
if command -v lstopo-no-graphics >/dev/null 2>&1; then
    lstopo-no-graphics --input "$tmp/dump.xml" --of console >/dev/null || fail "lstopo rejects the dump"
fi
MESH_TOPO_FILE=$tmp/dump.xml MESH_LOCAL_GPU=2 "$b/tools/mesh-info" -T >"$tmp/out"
has "gpus     : 8"
has "process  : gpu 2, cpus 0-15 (16), nic mlx5_2"

CUDA_VISIBLE_DEVICES=3,1 MESH_LOCAL_RANK=1 MESH_TOPO_FILE=$fx/pcie4.xml \
    "$b/tools/mesh-info" -T >"$tmp/out"
has "cores    : 8 (16 hardware threads, cpus 0-15)"
has "  gpu 0  0000:01:00.0  numa 0  cpus 0-15  nic mlx5_0 (6 hops)  GA102GL [RTX A6000]"
has "  nic 0  mlx5_0       rdma 0000:43:00.0  numa 0  netdev enp67s0f0np0"
has "process  : gpu 1, cpus 0-15 (16), nic mlx5_0"

MESH_TOPO_FILE=$fx/cpuonly.xml "$b/tools/mesh-info" -T >"$tmp/out"
has "gpus     : 0"
has "  nic 0  eno1         eth  0000:02:00.0  numa 0"
has "process  : gpu -1, cpus 0-3 (4), nic eno1"

# a file that is not there fails with its name
if MESH_TOPO_FILE=$tmp/none.xml "$b/tools/mesh-info" -T >"$tmp/out" 2>&1; then fail "accepted"; fi
grep -q "none.xml" "$tmp/out" || fail "error does not name the file"
# this machine: discovery works and prints the counts
"$b/tools/mesh-info" --topo >"$tmp/out"
grep -q "^source   : discovered" "$tmp/out" || fail "no discovery"
echo "mesh-info --topo: ok"
