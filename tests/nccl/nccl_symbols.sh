#!/bin/sh
# libnccl.so.2 exports exactly NCCL 2.28.9's entry points (nccl* weak, pnccl* global, as listed
# in nccl/nccl_symbols.txt), under SONAME libnccl.so.2, with no symbol versions of its own.
b=${top_builddir:-.}
s=${top_srcdir:-.}
lib="$b/nccl/.libs/libnccl.so.2"
command -v nm >/dev/null 2>&1 && command -v readelf >/dev/null 2>&1 || { echo "no binutils"; exit 77; }
[ -f "$lib" ] || { echo "missing $lib"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
grep -v '^#' "$s/nccl/nccl_symbols.txt" | sort -k2 > "$tmp/want"
nm -D --defined-only "$lib" | awk '{print $2, $3}' | sort -k2 > "$tmp/got"
if ! cmp -s "$tmp/want" "$tmp/got"; then
    echo "exported symbols differ from nccl/nccl_symbols.txt (< expected, > libnccl.so.2):"
    diff "$tmp/want" "$tmp/got"
    exit 1
fi
n=$(grep -c ' nccl' "$tmp/got")
[ "$n" -eq 53 ] || { echo "expected 53 nccl* symbols, found $n"; exit 1; }
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
[ "$soname" = libnccl.so.2 ] || { echo "SONAME is '$soname', expected libnccl.so.2"; exit 1; }
if readelf -V "$lib" | grep -q 'Version definition'; then
    echo "libnccl.so.2 defines symbol versions"
    exit 1
fi
if nm -D --defined-only "$lib" | awk '{print $3}' | grep -q '^mesh_'; then
    echo "mesh symbols leak out of libnccl.so.2"
    exit 1
fi
echo "libnccl.so.2: $(wc -l < "$tmp/got") symbols as NCCL 2.28.9, SONAME $soname, unversioned"
