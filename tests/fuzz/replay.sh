#!/bin/sh
# Replays the fuzz corpus (tests/fuzz/corpus/<target>/: seeds and every input that once found a
# defect) through each target built with the plain driver: a regression test of the parsers.
set -u
s=${top_srcdir:-.}
b=${top_builddir:-.}
status=0
for d in "$s"/tests/fuzz/corpus/*/; do
    t=$(basename "$d")
    if [ ! -x "$b/tests/fuzz/$t" ]; then
        echo "FAIL: $t: no program $b/tests/fuzz/$t"
        status=1
        continue
    fi
    if out=$("$b/tests/fuzz/$t" "$d" 2>&1); then
        echo "ok: $(printf '%s\n' "$out" | tail -n 1)"
    else
        echo "FAIL: $t"
        printf '%s\n' "$out" | tail -n 30
        status=1
    fi
done
exit $status
