# Sourced by the mesh-bench tests: the binaries, a scratch folder removed on exit, a short
# deadline, and check NAME EXPECTED GOT, which records a failure in $fail.
top_builddir=${top_builddir:-.}
MESHRUN="$top_builddir/tools/meshrun"
BENCH="$top_builddir/bench/mesh-bench"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
export MESH_TIMEOUT=60
fail=0
check() {
    if [ "$2" = "$3" ]; then echo "ok: $1"; else echo "FAIL: $1: expected [$2] got [$3]"; fail=1; fi
}
