#!/bin/bash
# Finds the newest Debian kernel of a series and prepares it for run.sh:
#   6.1, 6.12  image+headers pair from the host's apt sources (Debian 12); the
#              headers are installed on the host, the image is extracted.
#   rt         Debian 12's PREEMPT_RT kernel (6.1 rt-amd64), the same way: the
#              kernel where a sleeping lock under preemption-off is a bug.
#   rt612      Debian 12's PREEMPT_RT 6.12 (6.12.N+deb12-rt-amd64: the 6.12
#              series Debian 13 ships), the same way: today's RT, with the
#              printk and locking rework 6.1-rt predates.
#   debug      6.1 from Debian's linux-source with LOCKDEP, KASAN and UBSAN
#              (build_debug_kernel.sh).
#   noskip     debug without the uprobe single-step skip (build_noskip_kernel.sh):
#              a kernel where emulation must be refused.
#              With GT_CACHED_ONLY=1 (run.sh all) these two use the cached build
#              as it is, and fail rather than compile when there is none.
#   newest     Debian unstable's linux-image-amd64 (7.x today), whatever version
#              it points at this run. Built and packaged with that kernel's own gcc,
#              so a `debootstrap --variant=minbase sid` chroot cached under
#              work/sid holds gcc + linux-headers-amd64; nothing from unstable is
#              installed on the host. The image is extracted with dpkg-deb.
# Writes work/<series>/env (KREL, KDIR, VMLINUZ, MODDIR, and CHROOT for newest:
# KDIR is then a path inside the chroot).
set -euo pipefail
series=$1
here=$(cd "$(dirname "$0")" && pwd)
work=$here/work/$series
mkdir -p "$work"
apt_get() { DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 "$@"; }

# The kernel image: /boot/vmlinuz-K, or since 7.x /usr/lib/modules/K/vmlinuz[.unsigned].
find_vmlinuz() {
  local f
  for f in "$work/root/boot/vmlinuz-$1" "$work/root/usr/lib/modules/$1/vmlinuz.unsigned" "$work/root/usr/lib/modules/$1/vmlinuz"; do
    [ -f "$f" ] && { echo "$f"; return 0; }
  done
  return 1
}

write_env() { # KREL CHROOT
  local vmlinuz moddir=$work/root/lib/modules/$1
  vmlinuz=$(find_vmlinuz "$1") || { echo "no kernel image for $1 in $work/root" >&2; exit 1; }
  [ -d "$moddir" ] || moddir=$work/root/usr/lib/modules/$1
  cat >"$work/env" <<EOT
KREL=$1
KDIR=/usr/src/linux-headers-$1
VMLINUZ=$vmlinuz
MODDIR=$moddir
CHROOT=$2
EOT
}

extract_image() { # DEB-GLOB: unpack the downloaded image package into work/root
  rm -rf "$work/root"
  dpkg-deb -x $1 "$work/root"
  rm -f $1
}

fetch_debian12() {
  local pat krel= img rel
  case $series in
    6.1)  pat='^linux-image-6\.1\.0-[0-9]+-amd64-unsigned$' ;;
    6.12) pat='^linux-image-6\.12\.[0-9]+\+deb12-amd64-unsigned$' ;;
    rt)   pat='^linux-image-6\.1\.0-[0-9]+-rt-amd64-unsigned$' ;;
    rt612) pat='^linux-image-6\.12\.[0-9]+\+deb12-rt-amd64-unsigned$' ;;
  esac
  # Newest image whose headers package also exists.
  for img in $(apt-cache search --names-only "$pat" | awk '{print $1}' | sort -rV); do
    rel=${img#linux-image-}; rel=${rel%-unsigned}
    if apt-cache show "linux-headers-$rel" >/dev/null 2>&1; then krel=$rel; break; fi
  done
  if [ -z "$krel" ]; then
    echo "no linux-image/linux-headers pair for $series in the apt archive" >&2
    exit 1
  fi
  [ -d "/usr/src/linux-headers-$krel" ] || apt_get install -y -q --no-install-recommends "linux-headers-$krel" >&2
  if ! find_vmlinuz "$krel" >/dev/null; then
    (cd "$work" && rm -f linux-image-*.deb && apt-get download -q "linux-image-$krel-unsigned" >&2)
    extract_image "$work/linux-image-$krel-unsigned_*.deb"
  fi
  write_env "$krel" ""
}

in_chroot() { chroot "$chroot" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"; }

# The unstable chroot: created once (about a minute), refreshed every run so
# "newest" follows the archive.
prepare_sid_chroot() {
  command -v debootstrap >/dev/null || apt_get install -y -q --no-install-recommends debootstrap >&2
  if [ ! -x "$chroot/usr/bin/apt-get" ] || [ ! -f "$chroot/.gt-complete" ]; then
    rm -rf "$chroot"
    debootstrap --variant=minbase sid "$chroot" http://deb.debian.org/debian >"$work/debootstrap.log" 2>&1 ||
      { tail -20 "$work/debootstrap.log" >&2; exit 1; }
    touch "$chroot/.gt-complete"
  fi
  # The archive may be served from a dated snapshot whose Release file has
  # expired by the guest clock's standards; the signatures are still checked.
  echo 'Acquire::Check-Valid-Until "false";' >"$chroot/etc/apt/apt.conf.d/99gdbtrace"
  # apt in the chroot wants /proc; unmounted again on exit.
  if ! mountpoint -q "$chroot/proc"; then
    mount -t proc proc "$chroot/proc"
    trap "umount '$chroot/proc'" EXIT
  fi
  in_chroot apt-get -q update >&2 || exit 1
}

fetch_newest() {
  local chroot=$here/work/sid krel deb
  prepare_sid_chroot
  # linux-image-amd64 depends on exactly one linux-image-X-amd64: that is the newest.
  krel=$(in_chroot apt-cache depends linux-image-amd64 | sed -n 's/^ *Depends: linux-image-\(.*-amd64\)$/\1/p' | head -1)
  [ -n "$krel" ] || { echo "cannot resolve linux-image-amd64 in sid" >&2; exit 1; }
  if [ ! -d "$chroot/usr/src/linux-headers-$krel" ]; then
    in_chroot apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends \
      make gcc "linux-headers-$krel" >&2
  fi
  if ! find_vmlinuz "$krel" >/dev/null; then
    # Since 7.x the image package is split: linux-binary[-unsigned]-K holds the
    # kernel, linux-modules-K the modules (e1000 for the gdb session's network).
    # Older layouts have both in linux-image-K[-unsigned].
    rm -rf "$chroot/tmp/gt-kernel" && mkdir -p "$chroot/tmp/gt-kernel"
    in_chroot sh -c "cd /tmp/gt-kernel &&
      { apt-get download -q linux-binary-unsigned-$krel 2>/dev/null || apt-get download -q linux-binary-$krel 2>/dev/null ||
        apt-get download -q linux-image-$krel-unsigned 2>/dev/null || apt-get download -q linux-image-$krel; } &&
      { apt-get download -q linux-modules-$krel 2>/dev/null || true; }" >&2
    rm -rf "$work/root"
    for deb in "$chroot"/tmp/gt-kernel/*.deb; do dpkg-deb -x "$deb" "$work/root"; done
    rm -rf "$chroot/tmp/gt-kernel"
  fi
  write_env "$krel" "$chroot"
}

case $series in
  6.1 | 6.12 | rt | rt612) fetch_debian12 ;;
  newest) fetch_newest ;;
  debug | noskip)
    if [ "${GT_CACHED_ONLY:-}" = 1 ]; then
      . "$here/kernel_env.sh"
      cached_kernel_env "$work"
    else
      "$here/build_${series}_kernel.sh"
    fi
    ;;
  *) echo "unknown series $series (6.1, 6.12, newest, rt, rt612, debug, noskip)" >&2; exit 2 ;;
esac
