#!/bin/sh
# tree.sh DEST CC CFLAGS LDFLAGS [configure options...]
# Copies the source tree (what git tracks, and new files it does not ignore) into DEST/src and
# configures it there with CC, CFLAGS and LDFLAGS: a build apart from the in-place one, for the
# sanitizer and fuzzing builds (make check-tsan, make fuzz). Copied files keep their times, so a
# later run rebuilds only what changed; a change of flags configures again.
set -eu
[ $# -ge 4 ] || { sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 1; }
dest=$1 cc=$2 cflags=$3 ldflags=$4
shift 4
s=${top_srcdir:-.}
git -C "$s" rev-parse --git-dir >/dev/null 2>&1 ||
    { echo "tree.sh: $s is not a git checkout, which the copy is made from" >&2; exit 1; }
mkdir -p "$dest/src"
(cd "$s" && git ls-files -z --cached --others --exclude-standard |
    tar --null --ignore-failed-read -T - -cf - 2>/dev/null) | tar -xf - -C "$dest/src"
cd "$dest/src"
if [ ! -x configure ]; then
    ./autogen.sh >autogen.log 2>&1 || { cat autogen.log >&2; exit 1; }
fi
want="CC=$cc CFLAGS=$cflags LDFLAGS=$ldflags $*"
if [ ! -f config.status ] || [ "$(cat .tree-flags 2>/dev/null)" != "$want" ]; then
    ./configure -q CC="$cc" CFLAGS="$cflags" LDFLAGS="$ldflags" "$@" >configure.out 2>&1 ||
        { tail -n 30 configure.out >&2; exit 1; }
    printf '%s\n' "$want" >.tree-flags
fi
