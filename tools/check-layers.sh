#!/bin/sh
# The layering rule of the tree, checked on the #include lines of every C and C++ file:
#   libmesh/ <- transports/ <- collectives/ <- the clients parallel/, nccl/, bench/, python/
# A core file includes only from its own layer and those below it; a client file includes only
# the public headers (mesh.h, mesh/*.h), config.h and headers of its own folder; tools/ and the
# tests may include anything. Prints each violation as FILE:LINE: reason and exits 1 if any.
#   check-layers.sh [TREE]     (default: the source tree this script belongs to)
set -u
tree=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$tree" || exit 2
find libmesh transports collectives parallel nccl bench python \
    \( -name tests -prune \) -o -type f \( -name '*.[ch]' -o -name '*.cpp' -o -name '*.hpp' \
    -o -name '*.cu' \) -print 2>/dev/null | sort |
awk '
function rank(d) {
    if (d == "libmesh") return 1
    if (d == "transports") return 2
    if (d == "collectives") return 3
    if (d == "parallel" || d == "nccl" || d == "bench" || d == "python") return 4
    if (d == "tools" || d == "tests") return 5
    return 0
}
{
    file = $0
    split(file, parts, "/")
    layer = parts[1]
    n = 0
    while ((getline line < file) > 0) {
        n++
        if (line !~ /^[ \t]*#[ \t]*include[ \t]*["<]/) continue
        inc = line
        sub(/^[ \t]*#[ \t]*include[ \t]*["<]/, "", inc)
        sub(/[">].*$/, "", inc)
        if (inc ~ /^\.\.\//) {
            # resolve against the folder of the file, from the root of the tree
            nd = split(file, p2, "/") - 1
            ni = split(inc, p3, "/")
            for (k = 1; k <= ni; k++) {
                if (p3[k] == "..") { if (nd > 0) nd--; continue }
                p2[++nd] = p3[k]
            }
            inc = p2[1]
            for (k = 2; k <= nd; k++) inc = inc "/" p2[k]
            if (nd <= 1) { printf "%s:%d: includes a path out of the tree\n", file, n; bad++; continue }
        }
        top = inc
        sub(/\/.*$/, "", top)
        has_dir = index(inc, "/") > 0
        if (!has_dir) continue  # a system header, mesh.h, config.h or one beside the file
        r = rank(top)
        if (r == 0) continue    # <sys/...>, <mesh/...>, <torch/...>: not a folder of the tree
        if (rank(layer) <= 3) {
            if (r > rank(layer)) {
                printf "%s:%d: includes %s: %s/ is above %s/\n", file, n, inc, top, layer; bad++
            }
        } else if (top != layer) {
            printf "%s:%d: includes %s: %s/ sees only the public headers (mesh.h, mesh/*.h)\n",
                file, n, inc, layer; bad++
        }
    }
    close(file)
}
END { exit bad > 0 }'
