#!/bin/sh
# docs/environment.md is generated from the config tables (tools/mesh-info -c --markdown): this
# fails, showing the difference and the command that regenerates it, when a knob was added,
# changed or removed without regenerating it. Sections are compared module by module; the
# tables of optional parts this build lacks (mesh-info says "no") are left as they are.
#   environment.sh            the check (make check)
#   environment.sh --update   rewrites docs/environment.md, keeping the tables of the optional
#                             parts this build lacks where they were (make docs-env)
set -u
update=0
[ "${1:-}" = "--update" ] && update=1
s=${top_srcdir:-.}
b=${top_builddir:-.}
doc="$s/docs/environment.md"
info="$b/tools/mesh-info"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mesh-docs-env.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

# the reference shows defaults; values set here must not change it (nor a bad one fail it)
for v in $(env | sed -n 's/^\(MESH_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
if ! "$info" -c --markdown >"$tmp/new.md" 2>"$tmp/err"; then
    echo "FAIL: $info -c --markdown failed:"
    cat "$tmp/err"
    exit 1
fi
[ -f "$doc" ] || [ $update -eq 1 ] || {
    echo "FAIL: $doc is missing: make docs-env writes it"
    exit 1
}
[ -f "$doc" ] || : >"$doc"

# optional parts this build lacks, as mesh-info names them (libfabric is the ofi module)
missing=$("$info" | awk -F': *' '$2 == "no" {
    gsub(/ /, "", $1)
    print $1 == "libfabric" ? "ofi" : $1
}')

# one file per section: "preamble", then one per "## module", without the blank lines that
# end it (sections are joined with one blank line)
split_md() {
    mkdir -p "$2"
    awk -v dir="$2" '
        BEGIN { out = dir "/preamble"; blank = 0 }
        /^## / { out = dir "/" substr($0, 4); blank = 0 }
        /^$/ { blank++; next }
        { while (blank > 0) { print "" > out; blank-- } print > out }' "$1"
}
split_md "$doc" "$tmp/old"
split_md "$tmp/new.md" "$tmp/new"
sections() { sed -n 's/^## //p' "$1"; }
kept() { printf '%s\n' $missing | grep -qx "$1"; }

if [ $update -eq 1 ]; then
    # each kept table follows the table it followed before (or the preamble)
    anchor=preamble
    : >"$tmp/anchors"
    for m in $(sections "$doc"); do
        if [ -f "$tmp/new/$m" ]; then anchor=$m
        elif kept "$m"; then echo "$anchor $m" >>"$tmp/anchors"; fi
    done
    {
        cat "$tmp/new/preamble"
        for m in preamble $(sections "$tmp/new.md"); do
            [ "$m" = preamble ] || { echo; cat "$tmp/new/$m"; }
            for k in $(awk -v a="$m" '$1 == a { print $2 }' "$tmp/anchors"); do
                echo
                cat "$tmp/old/$k"
            done
        done
    } >"$tmp/merged.md"
    if cmp -s "$tmp/merged.md" "$doc"; then echo "docs/environment.md is up to date"
    else cp "$tmp/merged.md" "$doc" && echo "docs/environment.md rewritten"; fi
    exit $?
fi

status=0
for f in "$tmp/new"/*; do
    m=$(basename "$f")
    if [ ! -f "$tmp/old/$m" ]; then
        echo "FAIL: module '$m' is declared but missing from docs/environment.md"
        status=1
    elif ! cmp -s "$tmp/old/$m" "$f"; then
        echo "FAIL: docs/environment.md differs from the config tables in '$m':"
        diff -u "$tmp/old/$m" "$f" | sed '1,2d'
        status=1
    else
        echo "ok: $m"
    fi
done
for f in "$tmp/old"/*; do
    m=$(basename "$f")
    [ -f "$tmp/new/$m" ] && continue
    if kept "$m"; then
        echo "ok: $m (not in this build; left as it is)"
    else
        echo "FAIL: docs/environment.md has module '$m', which no table declares any more"
        status=1
    fi
done
if [ $status -ne 0 ]; then
    echo
    echo "docs/environment.md is out of date with the config tables; regenerate it with:"
    echo "    make docs-env"
    echo "(from a build with every optional transport, so that their tables stay in it)"
fi
exit $status
