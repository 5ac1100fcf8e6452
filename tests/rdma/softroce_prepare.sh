#!/bin/sh
# make check-softroce from a tree that lives where its guest would have hidden it: sources and
# build in two folders apart, under /tmp (which the guest mounts for itself), with spaces in
# every path. Copies what softroce.sh takes from a tree into such a layout, runs its image
# preparation there (SOFTROCE_PREPARE: no kernel, no boot) and checks the guest's files: the
# tree the steps start in holds every program and script they name, nothing /init mounts covers
# it, and (as root) each program starts in the image with only the image's libraries, from
# the folder and the environment the steps have.
set -u
b=$(cd "${top_builddir:-.}" && pwd)
s=$(cd "${top_srcdir:-.}" && pwd)
[ -w /tmp ] || { echo "softroce_prepare: /tmp not writable: skipped"; exit 77; }
tmp=$(mktemp -d "/tmp/mesh softroce.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM
src="$tmp/src dir"
build="$tmp/build dir"
img="$tmp/guest files"
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# the layout: what softroce.sh reads from each tree
mkdir -p "$src/tests/rdma" "$src/tests/mp" "$build/libmesh/.libs" "$build/parallel/.libs" || exit 99
cp "$s/tests/rdma/softroce.sh" "$src/tests/rdma/" || exit 99
for t in conf_verbs fault_verbs net_select net_lib; do
    cp "$s/tests/mp/$t.sh" "$src/tests/mp/" || exit 99
done
cp "$b/config.h" "$b/config.status" "$build/" || exit 99
for p in tools/meshrun tools/mesh-info tests/mp/conformance tests/mp/fault tests/mp/net_select \
    tests/mp/truncate tests/unit/test_verbs_device bench/.libs/mesh-bench; do
    [ -x "$b/$p" ] || continue
    mkdir -p "$build/$(dirname "$p")" && cp "$b/$p" "$build/$p" || exit 99
done
cp -P "$b"/libmesh/.libs/libmesh.so* "$build/libmesh/.libs/" 2>/dev/null
cp -P "$b"/parallel/.libs/libmesh_parallel.so* "$build/parallel/.libs/" 2>/dev/null

# as make check-softroce runs it: from the build folder, sources by a relative path
out=$(cd "$build" && SOFTROCE_PREPARE="$img" top_builddir=. top_srcdir="../src dir" \
    sh "../src dir/tests/rdma/softroce.sh" 2>&1)
rc=$?
printf '%s\n' "$out"
[ $rc -eq 77 ] && exit 77
[ $rc -eq 0 ] || { echo "FAIL: softroce.sh exit $rc"; exit 1; }
root="$img/root"
for f in init run-steps steps bin/busybox; do
    [ -f "$root/$f" ] || bad "no /$f in the image"
done
[ $fail -eq 0 ] || exit 1

# the folder the steps start in, and what /init mounts
tree=$(sed -n 's/^cd \([^ ]*\) .*/\1/p' "$root/run-steps")
[ -n "$tree" ] || { echo "FAIL: run-steps enters no folder"; exit 1; }
echo "guest tree: $tree"
case $tree in *"$tmp"* | /tmp | /tmp/*) bad "the guest tree $tree depends on the host's path" ;; esac
for m in $(grep -o 'mount -t [a-z]* [a-z]* /[^ ;]*' "$root/init" | awk '{ print $5 }'); do
    case $tree/ in "$m"/*) bad "/init mounts $m over the tree $tree" ;; esac
done
grep -q '^sh /run-steps$' "$root/init" || bad "/init does not run /run-steps"
# every program and script the steps name is in the tree
for p in tools/mesh-info tools/meshrun tests/unit/test_verbs_device tests/mp/conformance \
    tests/mp/net_select tests/mp/truncate tests/mp/net_select.sh tests/mp/conf_verbs.sh \
    tests/mp/net_lib.sh bench/.libs/mesh-bench config.h; do
    [ -f "$root$tree/$p" ] || bad "$tree/$p missing from the image"
done
for l in "$b"/libmesh/.libs/libmesh.so* "$b"/parallel/.libs/libmesh_parallel.so*; do
    [ -e "$l" ] || continue
    d=$(basename "$(dirname "$(dirname "$l")")")
    [ -e "$root$tree/$d/.libs/$(basename "$l")" ] || bad "$(basename "$l") missing"
done

# each program starts inside the image, from the tree, with the steps' environment
if [ "$(id -u)" = 0 ] && command -v chroot >/dev/null && chroot "$root" /bin/busybox true; then
    steps='tools/mesh-info --help >/dev/null
tools/meshrun --help >/dev/null
LD_LIBRARY_PATH=libmesh/.libs:parallel/.libs bench/.libs/mesh-bench --help >/dev/null
tests/mp/conformance --list >/dev/null
test -r tests/mp/net_lib.sh
test -w /tmp'
    [ -c "$root/dev/null" ] || mknod "$root/dev/null" c 1 3 || exit 99
    printf '%s\n' "$steps" >"$root/steps"
    res=$(chroot "$root" /bin/busybox sh -c 'export PATH=/bin; /bin/busybox --install -s /bin;
        sh /run-steps' 2>&1)
    printf '%s\n' "$res" | grep '^SOFTROCE'
    printf '%s\n' "$res" | grep -q '^SOFTROCE result rc=0$' || {
        printf '%s\n' "$res" | tail -20
        bad "the programs do not start in the image"
    }
    [ "$(printf '%s\n' "$res" | grep -c '^SOFTROCE done: .* rc=0 ')" -eq 6 ] || bad "want 6 steps"
else
    echo "not root (or no chroot): the programs were not started in the image"
fi
[ $fail -eq 0 ] && echo "softroce_prepare: ok"
exit $fail
