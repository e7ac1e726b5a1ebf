#!/usr/bin/env bash
# Builds the rxe guest the interop tests boot under QEMU (reference/ROCE_WIRE.md §3.2, Appendix A):
# a stock Debian kernel (the generic -amd64 flavour: it ships rdma_rxe.ko; -cloud-amd64 does not) and
# an initramfs with busybox, rdma-core's tools (ibv_*_pingpong, ibv_devinfo), perftest and the rxe
# modules. Everything comes from Debian packages fetched with `apt-get download` and extracted without
# installing them: no root is needed (only `apt-get update` must have run once).
#
# Usage: interop/guest/build-guest.sh [OUT_DIR]      (default: build/guest at the top of the tree)
# Output: OUT_DIR/vmlinuz, OUT_DIR/initrd.cpio, OUT_DIR/kver; cached: a second run with the same kernel,
# script and roles does nothing. Prints "guest: ready <dir> in <s> s".
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
OUT=$(mkdir -p "${1:-$TOP/build/guest}" && cd "${1:-$TOP/build/guest}" && pwd)
start=$SECONDS
die() { echo "guest: $*" >&2; exit 1; }
command -v apt-get >/dev/null || die "apt-get missing: the guest is built from Debian packages (a Debian or Ubuntu host is needed)"
command -v dpkg-deb >/dev/null || die "dpkg-deb missing (package dpkg)"

# The kernel ABI changes with Debian point releases: ask the meta-package which one is current.
KPKG=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
[ -n "$KPKG" ] || die "apt-cache knows no linux-image-amd64: run 'apt-get update' once (as root)"
K=${KPKG#linux-image-}
STAMP="$K $(cat "$0" "$HERE"/roles/*.sh "$HERE"/*.c | sha256sum | cut -c1-16)"
if [ -f "$OUT/stamp" ] && [ "$(cat "$OUT/stamp")" = "$STAMP" ] && [ -f "$OUT/initrd.cpio" ] && [ -f "$OUT/vmlinuz" ]; then
  echo "guest: ready $OUT (cached, kernel $K)"; exit 0
fi

# 1. The packages (a few MB each, the kernel 70 MB), kept in OUT/debs across builds.
PKGS="$KPKG busybox-static ibverbs-utils ibverbs-providers libibverbs1 librdmacm1 perftest libibumad3 libpci3 libnl-3-200 libnl-route-3-200 iproute2 libmnl0 libbsd0 libmd0 libcap2 libelf1 libbpf1 libgcc-s1 zlib1g libibverbs-dev"
mkdir -p "$OUT/debs"
need=""
for p in $PKGS; do ls "$OUT/debs/${p}_"*.deb >/dev/null 2>&1 || need="$need $p"; done
if [ -n "$need" ]; then
  (cd "$OUT/debs" && apt-get download -q -o APT::Sandbox::User=root $need >/dev/null 2>&1) || die "apt-get download of$need failed (run 'apt-get update' once, as root)"
fi

# 2. Userland: every package but the kernel extracted into one root, then only what the guest runs copied.
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
mkdir -p "$W/pkg" "$W/kmin" "$W/r"
for d in "$OUT"/debs/*.deb; do case $(basename "$d") in linux-image-*) ;; *) dpkg-deb -x "$d" "$W/pkg";; esac; done
# 3. Kernel: only the image and the module trees the guest loads (3 s; the whole package is 400 MB).
dpkg-deb --fsys-tarfile "$OUT"/debs/${KPKG}_*.deb | tar -x -C "$W/kmin" --wildcards './boot/vmlinuz-*' \
  './lib/modules/*/modules.builtin' './lib/modules/*/kernel/drivers/infiniband/*' './lib/modules/*/kernel/drivers/net/virtio_net.ko' \
  './lib/modules/*/kernel/drivers/net/net_failover.ko' './lib/modules/*/kernel/net/core/failover.ko' './lib/modules/*/kernel/drivers/virtio/*' \
  './lib/modules/*/kernel/net/ipv4/udp_tunnel.ko' './lib/modules/*/kernel/net/ipv6/ip6_udp_tunnel.ko' \
  './lib/modules/*/kernel/crypto/crc32_generic.ko' './lib/modules/*/kernel/fs/configfs/configfs.ko'
cp "$W"/kmin/boot/vmlinuz-"$K" "$W/vmlinuz"

R=$W/r; P=$W/pkg; L=usr/lib/x86_64-linux-gnu
mkdir -p $R/{bin,sbin,etc,proc,sys,dev,tmp,run,lib64,roles,lib/modules} $R/$L/libibverbs $R/etc/libibverbs.d
cp $P/bin/busybox $R/bin/busybox
for a in $($R/bin/busybox --list); do [ -e $R/bin/$a ] || ln -s busybox $R/bin/$a; done
BINS="usr/bin/ibv_devinfo usr/bin/ibv_devices usr/bin/ibv_rc_pingpong usr/bin/ibv_ud_pingpong usr/bin/ib_write_bw usr/bin/ib_read_bw usr/bin/ib_send_bw usr/bin/ib_write_lat usr/bin/rdma"
for b in $BINS; do [ -x "$P/$b" ] || die "$b missing from the extracted packages"; cp "$P/$b" $R/bin/; done
cp $P/$L/libibverbs/librxe-rdmav*.so $R/$L/libibverbs/
cp $P/etc/libibverbs.d/rxe.driver $R/etc/libibverbs.d/
# Shared libraries: resolved against the extracted packages first, the host's (the same Debian release) after.
LDP=$P/$L:$P/lib/x86_64-linux-gnu
for f in $(LD_LIBRARY_PATH=$LDP ldd $(for b in $BINS; do echo $P/$b; done) $P/$L/libibverbs/librxe-rdmav*.so 2>/dev/null \
           | awk '/=>/ && $3 ~ /^\//{print $3}' | sort -u); do
  n=$(basename "$f"); cp -L "$f" $R/$L/"$n"
done
grep -q 'not found' <(LD_LIBRARY_PATH=$LDP ldd $(for b in $BINS; do echo $P/$b; done)) && die "a library of the guest tools was not found"
cp -L /lib64/ld-linux-x86-64.so.2 $R/lib64/
mkdir -p $R/lib && ln -s ../usr/lib/x86_64-linux-gnu $R/lib/x86_64-linux-gnu
# The suite's own verbs program (pd_rc.c: one RC message with the retry attributes asked), compiled here
# against the headers and libibverbs of the extracted libibverbs-dev/libibverbs1 (never installed on the host).
# Without gcc the guest is built without it, and the tests that need it skip naming the package.
if command -v gcc >/dev/null; then
  gcc -O2 -Wall -o $R/bin/pd_rc "$HERE/pd_rc.c" -I$P/usr/include -L$P/$L -Wl,-rpath-link,$P/$L -libverbs \
    || die "compiling interop/guest/pd_rc.c against the extracted libibverbs-dev failed"
else
  echo "guest: gcc missing (Debian package gcc): the guest has no pd_rc, the RNR/retry cases against rxe will skip"
fi

# 4. Modules in dependency order, from each .ko's modinfo "depends=" (no kmod needed on the host).
KM=$W/kmin/lib/modules/$K
declare -A seen=(); ORDER=()
kofile() { find "$KM/kernel" -name "$1.ko" | head -1; }
visit() {
  local m=${1//-/_} f deps d
  [ -n "${seen[$m]:-}" ] && return 0; seen[$m]=1
  f=$(kofile "$m")
  if [ -z "$f" ]; then grep -q "/$m.ko\$" "$KM/modules.builtin" && return 0; die "module $m neither extracted nor built in"; fi
  deps=$(grep -a -o 'depends=[a-z0-9_,-]*' "$f" | head -1 | cut -d= -f2 | tr ',' ' ')
  for d in $deps; do visit "$d"; done
  ORDER+=("$f")
}
for m in virtio_pci virtio_net crc32_generic rdma_rxe ib_uverbs; do visit $m; done
n=0; for f in "${ORDER[@]}"; do n=$((n+1)); cp "$f" $R/lib/modules/$(printf %02d $n)-$(basename "$f"); done

cp "$HERE/init" $R/init; chmod +x $R/init
cp "$HERE"/roles/*.sh $R/roles/
(cd $R && find . | ./bin/busybox cpio -o -H newc 2>/dev/null) > "$W/initrd.cpio"
mv "$W/vmlinuz" "$OUT/vmlinuz"; mv "$W/initrd.cpio" "$OUT/initrd.cpio"; echo "$K" > "$OUT/kver"; echo "$STAMP" > "$OUT/stamp"
echo "guest: ready $OUT in $((SECONDS - start)) s (kernel $K, $n modules, initrd $(du -h "$OUT/initrd.cpio" | cut -f1))"
