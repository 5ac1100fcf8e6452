# Shared by the tests of the PyTorch backend; sourced with top_builddir and top_srcdir set. It
# skips (77) where configure found no torch and under the sanitizers (the backend loads mesh
# into a Python process, which ASan cannot instrument), sets b, s, py (the interpreter with
# torch) and the PYTHONPATH of the build tree's mesh_torch and the test harness, and provides
#   torch_ranks N [meshrun options] SCRIPT [args]   SCRIPT on N ranks under meshrun
b=${top_builddir:-.}
s=${top_srcdir:-.}
if [ "${MESH_TEST_SANITIZED:-0}" = 1 ]; then
    echo "skipped: the PyTorch backend is not tested under the sanitizers"
    exit 77
fi
if [ -z "${TORCH_PYTHON:-}" ]; then
    echo "skipped: mesh was configured without torch (./configure --with-torch)"
    exit 77
fi
py=$TORCH_PYTHON
PYTHONPATH=$(cd "$b" && pwd)/python:$(cd "$s" && pwd)/tests/torch${PYTHONPATH:+:$PYTHONPATH}
export PYTHONPATH
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
# the ranks share the machine's cores: one computing thread each
export OMP_NUM_THREADS=1

torch_ranks() {
    n=$1
    shift
    "$b/tools/meshrun" -n "$n" --timeout 600 "$@"
}
