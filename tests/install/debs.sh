#!/bin/bash
# The Debian packages as a user gets them, in a clean Debian 12 chroot:
#   lintian on both .debs: no errors (warnings are printed)
#   dpkg -i + apt-get -f install; gdbtrace-server --version; man gdbtrace-server and man 7 gdbtrace
#     render; every gdb loads the plugin (help gdbtrace status)
#   installing the Debian 6.1 and 6.12 kernel headers makes DKMS build and install gdbtrace.ko for
#     each (the kernel-upgrade path); modinfo shows the project version and the kernel's vermagic
#   dpkg -r removes every file the packages installed and DKMS's state for the module
#
#   tests/install/debs.sh [DEB_DIR]      (default: scripts/package.sh builds them into BUILD_DIR)
# Environment: BUILD_DIR (default ./build). The chroot base (debootstrap) and downloaded packages
# are cached in INSTALL_TEST_CACHE (default BUILD_DIR/install-test/cache), so reruns download
# nothing but apt's indexes; point it outside the build dir to share it between clones.
# The modules DKMS built are left in BUILD_DIR/install-test/ko/<series>/gdbtrace.ko, the layout
# tests/qemu/run.sh boots with GDBTRACE_KO_DIR=BUILD_DIR/install-test/ko.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD_DIR:-$repo/build}
work=$build/install-test
cache=${INSTALL_TEST_CACHE:-$work/cache}
root=$work/root
mkdir -p "$work" "$cache"
. "$(dirname "$0")/lib.sh"
section() { echo "=== $* (at ${SECONDS}s)"; }

deb_dir=${1:-}
if [ -z "$deb_dir" ]; then
  "$repo/scripts/package.sh" >/dev/null
  deb_dir=$build/packages
fi
debs=("$deb_dir"/gdbtrace_"$version"-*_amd64.deb "$deb_dir"/gdbtrace-dkms_"$version"-*_all.deb)
for deb in "${debs[@]}"; do [ -f "$deb" ] || { echo "FAIL: no package $deb" && exit 1; }; done

section "lintian"
lintian_out=$(lintian --tag-display-limit 0 "${debs[@]}" 2>&1) || true
echo "$lintian_out"
if grep -q '^E: ' <<<"$lintian_out"; then fail "lintian reports errors"; else ok "lintian: no errors"; fi

# The archive the host's apt uses for a suite (no mirror is written into the tree).
archive_of() {
  apt-cache policy | awk -v s="$1/main" '$3 == s && $4 == "amd64" { print $2; exit }'
}
mirror=$(archive_of bookworm)
security=$(archive_of bookworm-security)
[ -n "$mirror" ] && [ -n "$security" ] || { echo "FAIL: host apt has no bookworm + bookworm-security sources"; exit 1; }

# Runs a shell command in the chroot. Mounts live in a private namespace, so they are gone when
# the command ends, whatever happens to this script, and `rm -rf $root` never reaches the host.
in_chroot() {
  unshare --mount --propagation private /bin/sh -ec '
    root=$1 archives=$2; shift 2
    mount -t proc proc "$root/proc"
    mount --bind /dev "$root/dev"
    mount --bind "$archives" "$root/var/cache/apt/archives"
    exec chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
      DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 /bin/sh -ec "$*"' \
    in_chroot "$root" "$cache/archives" "$@"
}

section "chroot"
mkdir -p "$cache/archives/partial" "$cache/debootstrap-debs"
if [ ! -x "$cache/bookworm-minbase/usr/bin/apt-get" ]; then
  rm -rf "$cache/bookworm-minbase.tmp"
  debootstrap --variant=minbase --include=man-db --cache-dir="$cache/debootstrap-debs" \
    bookworm "$cache/bookworm-minbase.tmp" "$mirror" >"$work/debootstrap.log" 2>&1 ||
    { tail -20 "$work/debootstrap.log"; echo "FAIL: debootstrap"; exit 1; }
  mv "$cache/bookworm-minbase.tmp" "$cache/bookworm-minbase"
fi
if findmnt -rn -o TARGET | grep -q "^$root/"; then
  echo "FAIL: something is still mounted under $root; not removing it"
  exit 1
fi
rm -rf "$root"
cp -a "$cache/bookworm-minbase" "$root"
cat >"$root/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb $security bookworm-security main
EOF
# Keep downloaded packages for the next run (the archives directory is the cache).
echo 'APT::Keep-Downloaded-Packages "true"; Binary::apt::APT::Keep-Downloaded-Packages "true";' \
  >"$root/etc/apt/apt.conf.d/90keep-debs"
mkdir -p "$root/tmp/debs"
cp "${debs[@]}" "$root/tmp/debs/"
in_chroot 'apt-get -q update >/dev/null'

section "dpkg -i"
if in_chroot 'dpkg -i /tmp/debs/*.deb >/tmp/dpkg-i.log 2>&1 || true
              apt-get -q -y --no-install-recommends -f install >/tmp/apt-f.log 2>&1 || { tail -30 /tmp/apt-f.log; exit 1; }
              [ "$(dpkg -s gdbtrace gdbtrace-dkms | grep -c "^Status: install ok installed")" = 2 ]'; then
  ok "dpkg -i + apt-get -f install: gdbtrace and gdbtrace-dkms installed"
else
  fail "the packages did not install"
fi
echo "gdbtrace Depends: $(dpkg-deb -f "${debs[0]}" Depends)"

out=$(in_chroot 'gdbtrace-server --version' 2>&1) || true
if grep -q "^gdbtrace-server $version " <<<"$out"; then ok "gdbtrace-server --version: $(head -1 <<<"$out")"; else fail "gdbtrace-server --version: $out"; fi

out=$(in_chroot 'MANWIDTH=80 man gdbtrace-server 2>&1' || true)
if grep -q "MONITOR COMMANDS" <<<"$out" && grep -q -- "--attach" <<<"$out"; then
  ok "man gdbtrace-server renders ($(wc -l <<<"$out") lines)"
else
  fail "man gdbtrace-server: $(head -5 <<<"$out")"
fi
out=$(in_chroot 'MANWIDTH=80 man 7 gdbtrace 2>&1' || true)
if grep -q "gdbtrace status" <<<"$out"; then ok "man 7 gdbtrace renders"; else fail "man 7 gdbtrace: $(head -5 <<<"$out")"; fi

# gdb is only recommended; install it to see the plugin auto-load without any ~/.gdbinit.
out=$(in_chroot 'apt-get -q -y --no-install-recommends install gdb >/tmp/gdb.log 2>&1 || { tail /tmp/gdb.log; exit 1; }
                 gdb -batch -ex "help gdbtrace status"' 2>&1 || true)
if grep -q "Usage: gdbtrace status" <<<"$out"; then ok "gdb auto-loads the plugin"; else fail "plugin not loaded by gdb: $out"; fi

section "DKMS: kernel headers for 6.1 and 6.12"
# The newest image+headers pair of each series, as tests/qemu/fetch_kernels.sh picks it, so the
# module DKMS builds is the one the QEMU harness can boot.
krel_of() {
  local pat=$1 img rel
  for img in $(apt-cache search --names-only "$pat" | awk '{print $1}' | sort -rV); do
    rel=${img#linux-image-}
    rel=${rel%-unsigned}
    if apt-cache show "linux-headers-$rel" >/dev/null 2>&1; then echo "$rel"; return; fi
  done
}
declare -A krels
krels[6.1]=$(krel_of '^linux-image-6\.1\.0-[0-9]+-amd64-unsigned$')
krels[6.12]=$(krel_of '^linux-image-6\.12\.[0-9]+\+deb12-amd64-unsigned$')
# 6.12's headers depend on its image: no initramfs for a kernel this chroot never boots (slow).
in_chroot 'dpkg-divert --local --rename --add /usr/sbin/update-initramfs >/dev/null
           ln -sf /bin/true /usr/sbin/update-initramfs'
rm -rf "$work/ko"
for series in 6.1 6.12; do
  krel=${krels[$series]}
  [ -n "$krel" ] || { fail "no $series kernel in the archive"; continue; }
  # Installing headers runs DKMS's header_postinst.d hook: a kernel upgrade, as a user has it.
  if ! in_chroot "apt-get -q -y --no-install-recommends install linux-headers-$krel >/tmp/headers-$series.log 2>&1" ; then
    tail -30 "$root/tmp/headers-$series.log"
    fail "installing linux-headers-$krel"
    continue
  fi
  status=$(in_chroot "dkms status -m gdbtrace -v $version -k $krel" 2>&1 || true)
  # DKMS compresses the module like the kernel's own (6.12: gdbtrace.ko.xz).
  ko=$(find "$root/var/lib/dkms/gdbtrace/$version/$krel/x86_64/module" -name 'gdbtrace.ko*' 2>/dev/null | head -1)
  if grep -q "installed" <<<"$status" && [ -n "$ko" ] &&
    compgen -G "$root/lib/modules/$krel/updates/dkms/gdbtrace.ko*" >/dev/null; then
    ok "DKMS built and installed gdbtrace.ko for $krel"
  else
    echo "$status"
    find "$root/var/lib/dkms/gdbtrace" -name make.log -exec tail -30 {} \; 2>/dev/null
    fail "DKMS did not build gdbtrace.ko for $krel"
    continue
  fi
  mkdir -p "$work/ko/$series"
  case "$ko" in # busybox insmod in the QEMU guest takes only plain .ko files
    *.xz) xz -dc "$ko" >"$work/ko/$series/gdbtrace.ko" ;;
    *.zst) zstd -qdc "$ko" >"$work/ko/$series/gdbtrace.ko" ;;
    *.gz) gzip -dc "$ko" >"$work/ko/$series/gdbtrace.ko" ;;
    *) cp "$ko" "$work/ko/$series/gdbtrace.ko" ;;
  esac
  ko=$work/ko/$series/gdbtrace.ko
  vermagic=$(modinfo -F vermagic "$ko")
  [ "${vermagic%% *}" = "$krel" ] && ok "vermagic $krel" || fail "vermagic '$vermagic' is not $krel"
  modver=$(modinfo -F version "$ko")
  [ "$modver" = "$version" ] && ok "modinfo version $modver" ||
    fail "modinfo -F version is '$modver', not $version (kmodule must turn GDBTRACE_VERSION into MODULE_VERSION)"
done

section "dpkg -r"
in_chroot 'dpkg -r gdbtrace gdbtrace-dkms >/tmp/dpkg-r.log 2>&1' || { cat "$root/tmp/dpkg-r.log"; fail "dpkg -r"; }
left=()
for deb in "${debs[@]}"; do
  while read -r path; do
    [ -e "$root/$path" ] || [ -L "$root/$path" ] && left+=("$path")
  done < <(dpkg-deb --fsys-tarfile "$deb" | tar -t | grep -v '/$' | sed 's|^\./||')
done
for krel in "${krels[@]}"; do
  for f in "$root/lib/modules/$krel/updates/dkms/"gdbtrace.ko*; do
    if [ -e "$f" ]; then left+=("${f#"$root"}"); fi
  done
done
[ -e "$root/var/lib/dkms/gdbtrace" ] && left+=("/var/lib/dkms/gdbtrace")
# Anything else named for gdbtrace that running the programs left behind (e.g. Python caches).
while read -r path; do left+=("${path#"$root"}"); done < <(find "$root/usr" "$root/etc" "$root/var/lib/dkms" \
  -name '*gdbtrace*' 2>/dev/null || true)
if [ ${#left[@]} = 0 ]; then ok "dpkg -r removed every installed file and DKMS's gdbtrace state"; else fail "left after dpkg -r: ${left[*]}"; fi

echo
if [ "$failures" = 0 ]; then echo "debs: all checks passed in ${SECONDS}s"; else echo "debs: $failures check(s) failed (${SECONDS}s)"; fi
exit $((failures > 0))
