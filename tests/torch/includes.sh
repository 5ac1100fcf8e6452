#!/bin/sh
# python/csrc is a client of the public API: of mesh's headers it includes mesh.h (and
# include/mesh/*.h) only, beside its own headers, torch's, pybind11's and the standard ones.
s=${top_srcdir:-.}
set -- "$s"/python/csrc/*.cpp "$s"/python/csrc/*.hpp
if [ ! -f "$1" ]; then
    echo "no sources in $s/python/csrc"
    exit 1
fi
bad=$(grep -n -E '^[[:space:]]*#[[:space:]]*include' "$@" |
      grep -v -E '#[[:space:]]*include[[:space:]]*("[a-z_]+\.hpp"|<mesh(/[a-z_]+)?\.h>|<(torch|ATen|c10|pybind11)/[A-Za-z0-9_/]+\.h(pp)?>|<[a-z_]+(\.h)?>|<sys/[a-z_]+\.h>)')
if [ -n "$bad" ]; then
    echo "python/csrc includes headers beyond mesh.h, its own and torch's:"
    echo "$bad"
    exit 1
fi
echo "python/csrc ($# files): includes mesh.h, its own, torch's and system headers only"
