#!/bin/sh
# The tree is formatted by its own .clang-format (tools/check-format.sh), and the check fails,
# naming the file, on a copy with one badly formatted line planted.
set -u
s=${top_srcdir:-.}
"$s/tools/check-format.sh" "$s"
rc=$?
[ $rc -eq 77 ] && exit 77
status=0
if [ $rc -eq 0 ]; then echo "ok: the tree matches .clang-format"
else echo "FAIL: the files above do not match .clang-format"; status=1; fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mesh-format.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
mkdir -p "$tmp/libmesh"
cp "$s/.clang-format" "$tmp/"
cp "$s/libmesh/status.c" "$tmp/libmesh/status.c"
printf 'static int  planted (void){return 0;}\n' >> "$tmp/libmesh/status.c"
if out=$("$s/tools/check-format.sh" "$tmp" 2>&1); then
    echo "FAIL: a planted misformatted line passed the check"
    status=1
elif printf '%s\n' "$out" | grep -q "^libmesh/status.c: not formatted"; then
    echo "ok: a planted misformatted line is named"
else
    echo "FAIL: the check failed without naming the file:"
    printf '%s\n' "$out"
    status=1
fi
exit $status
