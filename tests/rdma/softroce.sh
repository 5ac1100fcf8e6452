#!/bin/sh
# The verbs transport on a real (software) RDMA device: boots Debian's kernel in qemu (under KVM
# where a guest boots on it, else emulated) with rdma_rxe (soft-RoCE) on a dummy interface, in an
# initramfs that holds busybox, this build's test programs and the libraries they load, and runs
# there the verbs device test, network selection, the collective conformance suite, the
# keepalive probe and receives shorter than their messages, then mesh-bench all-reduce and
# all-to-all over verbs (checked). Not the
# peer-failure test (fault_verbs.sh): Linux 6.1's rdma_rxe never completes a work request sent
# to a queue pair destroyed with its process (no retry error comes back), so a killed rank is
# only seen at MESH_TIMEOUT there, and a survivor that waits on another survivor names that one.
# SOFTROCE_STEPS replaces those steps with shell lines of its own, run from the build tree.
# SOFTROCE_ACCEL=tcg skips the KVM probe.
#
# The guest sees the build tree (with the scripts it runs from the source tree) at /mesh, not
# at its path here, so the tree may live anywhere: under /tmp, behind a path with spaces, in a
# build folder apart from the sources. SOFTROCE_PREPARE=DIR writes the guest's files (the
# initramfs before packing, without the kernel's modules) to DIR and stops there, which
# tests/rdma/softroce_prepare.sh checks without booting anything.
#
# Needs qemu-system-x86_64, a static busybox and the kernel package: the .deb or the folder it
# was unpacked into in SOFTROCE_KERNEL, else tests/rdma/linux-image.deb in the build tree, else
# one fetched there with `apt-get download` (Debian's linux-image-amd64). Skips (77) when any of
# these is missing, under a sanitizer build (which has no device to find), where verbs was not
# built, when the machine does not start, and when it runs past SOFTROCE_TIMEOUT seconds (1500)
# with no step failed.
set -u
b=$(cd "${top_builddir:-.}" && pwd)
s=$(cd "${top_srcdir:-.}" && pwd)
# where the guest finds the tree
g=/mesh
prepare=${SOFTROCE_PREPARE:-}
skip() { echo "softroce: $*: skipped"; exit 77; }

grep -q '^#define HAVE_VERBS 1' "$b/config.h" 2>/dev/null || skip "built without libibverbs"
grep -q -- '-fsanitize' "$b/config.status" 2>/dev/null && skip "sanitizer build"
if [ -z "$prepare" ]; then
    qemu=$(command -v qemu-system-x86_64) || skip "qemu-system-x86_64 not found"
fi
bb=""
for c in /bin/busybox /usr/bin/busybox; do
    [ -x "$c" ] && ! ldd "$c" >/dev/null 2>&1 && { bb=$c; break; }
done
[ -n "$bb" ] || skip "no static busybox (Debian: busybox-static)"
# the programs the steps run, at their paths in the build tree
progs="tools/meshrun tools/mesh-info tests/mp/conformance tests/mp/fault tests/mp/net_select"
progs="$progs tests/mp/truncate tests/unit/test_verbs_device bench/.libs/mesh-bench"
for p in $progs; do
    [ -x "$b/$p" ] || skip "$p not built"
done

if [ -n "$prepare" ]; then
    mkdir -p "$prepare" || exit 1
    work=$(cd "$prepare" && pwd)
else
    work=$(mktemp -d "${TMPDIR:-/tmp}/mesh-rxe.XXXXXX") || exit 1
    trap 'rm -rf "$work"' EXIT INT TERM
fi
root="$work/root"
mkdir -p "$root/bin" "$root/lib/modules" "$root/proc" "$root/sys" "$root/dev" "$root/tmp" \
    "$root/etc" "$root/run" "$root$g" || exit 1
chmod 1777 "$root/tmp"

# userland: busybox, the programs at their paths in the tree under $g, their libraries at their
# own paths (ldd's lines are "name => /path (0x...)" or "/path (0x...)"; paths may hold spaces)
cp "$bb" "$root/bin/busybox"
libs() {
    ldd "$1" 2>/dev/null | sed -n -e 's/^[[:space:]]*[^[:space:]]* => \(\/.*\) (0x[0-9a-f]*)$/\1/p' \
        -e 's/^[[:space:]]*\(\/.*\) (0x[0-9a-f]*)$/\1/p'
}
# put FILE DEST: FILE into the image as DEST, with the libraries it loads
put() {
    mkdir -p "$root$(dirname "$2")" && cp -L "$1" "$root$2" || skip "cannot copy $1 into the image"
    libs "$1" | while IFS= read -r l; do
        [ -e "$root$l" ] && continue
        mkdir -p "$root$(dirname "$l")" && cp -L "$l" "$root$l" || exit 1
    done || skip "cannot copy the libraries of $1 into the image"
}
for p in $progs; do
    put "$b/$p" "$g/$p"
done
# the libraries of the tree (mesh-bench loads libmesh_parallel too)
for l in "$b"/libmesh/.libs/libmesh.so* "$b"/parallel/.libs/libmesh_parallel.so*; do
    [ -e "$l" ] || continue
    d=$(basename "$(dirname "$(dirname "$l")")")
    put "$l" "$g/$d/.libs/$(basename "$l")"
done
cp "$b/config.h" "$root$g/config.h"
for t in tests/mp/conf_verbs.sh tests/mp/fault_verbs.sh tests/mp/net_select.sh \
    tests/mp/net_lib.sh; do
    mkdir -p "$root$g/$(dirname "$t")"
    cp "$s/$t" "$root$g/$t" || skip "cannot copy $t into the image"
done
for c in rdma ip; do
    p=$(command -v $c) || skip "$c (iproute2) not found"
    put "$p" "$p"
done
mkdir -p "$root/var" && ln -sf ../run "$root/var/run"
# the rxe provider of libibverbs and the file that names it
prov=$(ls /usr/lib/*/libibverbs/librxe-rdmav*.so 2>/dev/null | head -1)
[ -n "$prov" ] && [ -r /etc/libibverbs.d/rxe.driver ] ||
    skip "libibverbs' rxe provider not installed"
put "$prov" "$prov"
mkdir -p "$root/etc/libibverbs.d"
cp /etc/libibverbs.d/rxe.driver "$root/etc/libibverbs.d/"
echo "root:x:0:0:root:/root:/bin/sh" >"$root/etc/passwd"

# what runs on the device, one shell line a step, from the build tree: SOFTROCE_STEPS or these
if [ -n "${SOFTROCE_STEPS:-}" ]; then
    printf '%s\n' "$SOFTROCE_STEPS" >"$root/steps"
else
    cat >"$root/steps" <<'EOF'
tools/mesh-info -t
tests/unit/test_verbs_device
sh tests/mp/net_select.sh
sh tests/mp/conf_verbs.sh
MESH_IB_KEEPALIVE=0.001 MESH_TLS=self,shm,verbs MESH_TUNE=allreduce:ring tools/meshrun -n 4 --nodes 2 --timeout 300 tests/mp/conformance -o allreduce -a ring -d int32,bf16
MESH_TLS=self,shm,verbs tools/meshrun -n 2 --nodes 2 --timeout 300 tests/mp/truncate --expect verbs
LD_LIBRARY_PATH=libmesh/.libs:parallel/.libs MESH_TLS=self,verbs tools/meshrun -n 2 --nodes 2 --timeout 300 bench/.libs/mesh-bench -o allreduce,alltoall -b 8 -e 64m -f 8 -n 10 -w 2 -c 1
EOF
fi

# in dependency order: soft-RoCE (its ICRC through the crypto API), the interface it runs on,
# and what meshrun's simulated nodes use
modules="crc32_generic udp_tunnel ip6_udp_tunnel ib_core ib_uverbs rdma_rxe dummy"
modules="$modules veth llc stp bridge"
# /init brings the device up and hands over to /run-steps, which runs the steps in the tree.
# The initramfs is already a writable tmpfs, so nothing is mounted over the tree or /tmp.
cat >"$root/init" <<EOF
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin:/usr/bin:/usr/sbin:/sbin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
mkdir -p /dev/shm /dev/pts; mount -t tmpfs tmpfs /dev/shm
for m in $modules; do
    insmod /lib/modules/\$m.ko || echo "SOFTROCE insmod \$m failed"
done
ip link set lo up
ip addr add 10.77.0.1/24 dev dummy0; ip link set dummy0 mtu 9000 up
rdma link add rxe0 type rxe netdev dummy0 || echo "SOFTROCE rdma link add failed"
sh /run-steps
poweroff -f
EOF
cat >"$root/run-steps" <<EOF
echo
echo "SOFTROCE start"
cd $g || { echo "SOFTROCE result rc=1 (no tree at $g)"; exit 1; }
export top_builddir=. top_srcdir=.
rc=0
step() {
    echo "SOFTROCE run: \$*"
    t0=\$(date +%s)
    "\$@"; r=\$?
    echo "SOFTROCE done: \$* rc=\$r in \$((\$(date +%s) - t0)) s"
    [ \$r -eq 0 ] || rc=1
}
while IFS= read -r line; do step sh -c "\$line" </dev/null || rc=1; done </steps
echo "SOFTROCE result rc=\$rc"
EOF
chmod +x "$root/init"
if [ -n "$prepare" ]; then
    echo "softroce: guest files in $root (no kernel, not packed)"
    exit 0
fi

# the kernel: vmlinuz plus the modules rxe needs
kpkg=${SOFTROCE_KERNEL:-}
if [ -z "$kpkg" ]; then
    kpkg="$b/tests/rdma/linux-image.deb"
    if [ ! -s "$kpkg" ]; then
        name=$(apt-cache depends linux-image-amd64 2>/dev/null |
            awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
        [ -n "$name" ] || skip "no linux-image-amd64 package known to apt"
        mkdir -p "$b/tests/rdma"
        (cd "$work" && timeout 300 apt-get download -q "$name" >/dev/null 2>&1) ||
            skip "apt-get download $name failed"
        mv "$work"/linux-image-*.deb "$kpkg" || skip "apt-get download $name gave no package"
    fi
fi
if [ -d "$kpkg" ]; then
    kdir=$kpkg
else
    kdir="$work/kernel"
    dpkg-deb -x "$kpkg" "$kdir" || skip "cannot unpack $kpkg"
fi
vmlinuz=$(ls "$kdir"/boot/vmlinuz-* 2>/dev/null | head -1)
[ -n "$vmlinuz" ] || skip "no vmlinuz in $kpkg"
mods=$(ls -d "$kdir"/lib/modules/* 2>/dev/null | head -1)
for m in $modules; do
    f=$(find "$mods" -name "$m.ko*" | head -1)
    [ -n "$f" ] || skip "module $m not in $kpkg"
    case $f in
    *.ko.xz) xz -dc "$f" >"$root/lib/modules/$m.ko" ;;
    *.ko.zst) zstd -qdc "$f" >"$root/lib/modules/$m.ko" ;;
    *) cp "$f" "$root/lib/modules/$m.ko" ;;
    esac || skip "cannot unpack module $m"
done
(cd "$root" && find . | "$bb" cpio -o -H newc 2>/dev/null | gzip -1) >"$work/initrd.gz" ||
    skip "cannot pack the initramfs"
# KVM where a guest really boots on it (nested KVM can hang in the kernel's early start), else
# qemu's own emulation, slower but the same guest
accel="-accel tcg,thread=multi -cpu max"
if [ "${SOFTROCE_ACCEL:-auto}" != tcg ] && [ -r /dev/kvm ] && [ -w /dev/kvm ]; then
    mkdir -p "$work/probe/bin"
    cp "$bb" "$work/probe/bin/busybox"
    printf '#!/bin/busybox sh\n/bin/busybox echo SOFTROCE-KVM-OK\n/bin/busybox poweroff -f\n' \
        >"$work/probe/init"
    chmod +x "$work/probe/init"
    (cd "$work/probe" && find . | "$bb" cpio -o -H newc 2>/dev/null | gzip -1) >"$work/probe.gz"
    timeout 30 "$qemu" -enable-kvm -cpu host -smp 1 -m 256 -nographic -no-reboot -nic none \
        -kernel "$vmlinuz" -initrd "$work/probe.gz" \
        -append "console=ttyS0 quiet panic=-1 rdinit=/init" \
        </dev/null 2>/dev/null | grep -q SOFTROCE-KVM-OK && accel="-enable-kvm -cpu host"
fi
echo "softroce: booting $(basename "$vmlinuz") with rdma_rxe ($accel)"
timeout "${SOFTROCE_TIMEOUT:-1500}" "$qemu" $accel -smp "$(nproc)" -m 3072 \
    -nographic -no-reboot -nic none -kernel "$vmlinuz" -initrd "$work/initrd.gz" \
    -append "console=ttyS0 quiet no_timer_check panic=-1 rdinit=/init" </dev/null >"$work/console" 2>&1
qrc=$?
tr -d '\r' <"$work/console" | grep -v '^\[ *[0-9.]*\] ' | sed -n '/^SOFTROCE start$/,$p'
tr -d '\r' <"$work/console" | grep -q '^SOFTROCE result rc=0$' && exit 0
if ! tr -d '\r' <"$work/console" | grep -q '^SOFTROCE start$'; then
    tr -d '\r' <"$work/console" | tail -20
    skip "the virtual machine did not start (qemu exit $qrc)"
fi
failed=$(tr -d '\r' <"$work/console" | grep -c '^SOFTROCE done: .* rc=[1-9]')
if [ $qrc -eq 124 ] && [ "$failed" -eq 0 ]; then
    # every step has its own time limit, so this is a host too slow for the emulation
    skip "the virtual machine ran past ${SOFTROCE_TIMEOUT:-1500} s; the steps that ended passed"
fi
echo "softroce: FAIL ($failed step(s) failed, qemu exit $qrc)"
exit 1
