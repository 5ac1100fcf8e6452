#!/bin/sh
# The tree's C, C++ and CUDA sources against its .clang-format. Usage: check-format.sh [TOP]
# [--fix]. Prints each file clang-format would change and exits 1 if any; --fix rewrites them
# instead. The style is pinned to clang-format's major version MESH_CLANG_FORMAT_MAJOR (14,
# Debian 12's): other versions break lines differently, so with another one, or none, it says
# so and exits 77 (a skip under make check).
set -u
top=${1:-.}
fix=0
[ "${2:-}" = "--fix" ] && fix=1
want=${MESH_CLANG_FORMAT_MAJOR:-14}
cf=${CLANG_FORMAT:-}
if [ -z "$cf" ]; then
    for c in clang-format-$want clang-format; do
        command -v "$c" >/dev/null 2>&1 && { cf=$c; break; }
    done
fi
if [ -z "$cf" ]; then
    echo "check-format: no clang-format (apt-get install clang-format)"
    exit 77
fi
major=$("$cf" --version | sed -n 's/.*version \([0-9][0-9]*\)\..*/\1/p')
if [ "$major" != "$want" ]; then
    echo "check-format: $cf is version $major; the tree's style is that of version $want"
    exit 77
fi
cd "$top" || exit 2
# the tracked sources; a tree without git (a release tarball): the sources under the layers
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    files=$(git ls-files '*.c' '*.h' '*.cc' '*.cpp' '*.hpp' '*.cu')
else
    files=$(find include libmesh transports collectives parallel nccl python bench tools tests \
        -type f \( -name '*.c' -o -name '*.h' -o -name '*.cc' -o -name '*.cpp' -o -name '*.hpp' \
        -o -name '*.cu' \) ! -name 'config.h' ! -name 'cu_fatbin.c' 2>/dev/null | sort)
fi
bad=0
for f in $files; do
    [ -f "$f" ] || continue
    if [ $fix -eq 1 ]; then
        "$cf" -i "$f"
    elif ! "$cf" --dry-run --Werror "$f" >/dev/null 2>&1; then
        echo "$f: not formatted (tools/check-format.sh . --fix rewrites it)"
        bad=1
    fi
done
exit $bad
