#!/bin/sh
# The layering rule: the tree passes tools/check-layers.sh; a copy of the tree with one bad
# include planted per rule fails it, naming the file; and such an include does not even compile,
# since each layer's include path (layers/ in the build tree) holds only what it may use.
set -u
s=${top_srcdir:-.}
b=${top_builddir:-.}
status=0
ok() { echo "ok: $1"; }
bad() { echo "FAIL: $1"; status=1; }

if out=$("$s/tools/check-layers.sh" "$s" 2>&1); then ok "the tree keeps its layers"
else bad "the tree breaks its layers:"; printf '%s\n' "$out"; fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mesh-layers.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
# one planted include per rule: file, include, what the report must name
while IFS='|' read -r file inc want; do
    [ -n "$file" ] || continue
    rm -rf "$tmp/tree"
    mkdir -p "$tmp/tree"
    (cd "$s" && tar cf - libmesh transports collectives nccl bench parallel 2>/dev/null) |
        (cd "$tmp/tree" && tar xf -)
    mkdir -p "$tmp/tree/$(dirname "$file")"
    printf '#include "%s"\n' "$inc" >> "$tmp/tree/$file"
    if out=$("$s/tools/check-layers.sh" "$tmp/tree" 2>&1); then
        bad "$file including $inc passed the check"
    elif printf '%s\n' "$out" | grep -q "^$file:.*$want"; then
        ok "$file including $inc is refused ($want)"
    else
        bad "$file including $inc: unexpected report:"; printf '%s\n' "$out"
    fi
done <<'LIST'
libmesh/dtype.c|transports/tl.h|transports/ is above libmesh/
libmesh/log.c|collectives/comm.h|collectives/ is above libmesh/
transports/tl_stub.c|collectives/sched.h|collectives/ is above transports/
collectives/select.c|parallel/common.h|parallel/ is above collectives/
collectives/sched.c|nccl/nccl_priv.h|nccl/ is above collectives/
parallel/common.c|libmesh/log.h|parallel/ sees only the public headers
parallel/zero/planted.c|../../collectives/comm.h|parallel/ sees only the public headers
nccl/misc.c|collectives/comm.h|nccl/ sees only the public headers
bench/bench_out.c|transports/tl.h|bench/ sees only the public headers
LIST

# the compiler refuses it too, from each layer's include path
if [ -d "$b/layers" ]; then
    for t in "libmesh/dtype.c:collectives/comm.h:layers/base" \
             "transports/tl_stub.c:collectives/sched.h:layers/tl" \
             "nccl/misc.c:libmesh/log.h:layers/nccl"; do
        file=${t%%:*}; rest=${t#*:}; inc=${rest%%:*}; root=${rest#*:}
        { cat "$s/$file"; printf '#include "%s"\n' "$inc"; } > "$tmp/planted.c"
        if ${CC:-cc} -fsyntax-only -I"$b/$root" -I"$s/include" $(pkg-config --cflags hwloc 2>/dev/null) \
            "$tmp/planted.c" > "$tmp/cc.log" 2>&1; then
            bad "$file including $inc compiled from $root"
        elif grep -q "$inc: No such file" "$tmp/cc.log"; then
            ok "$file including $inc does not compile from $root"
        else
            bad "$file including $inc failed to compile for another reason:"; head -5 "$tmp/cc.log"
        fi
    done
else
    echo "no layers/ in the build tree: configure makes it"; status=1
fi
exit $status
