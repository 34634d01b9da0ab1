#!/bin/bash
# The README's quick start as a new user meets it: a clean Debian 12 root (debootstrap bookworm, the
# standard variant a fresh machine has), a clone of this repository's HEAD in it, then, as root inside
# the chroot, `scripts/demo.sh --batch` (the main job, non-interactive) and `scripts/test.sh`.
# A package the project needs but does not list in scripts/packages.txt fails here even when this
# machine has it installed.
#
#   scripts/fresh-check.sh               both commands
#   scripts/fresh-check.sh --demo-only   only the build + demo (quick: ~15 min)
#
# The debootstrapped base is cached in $FRESH_CACHE (default /var/cache/gdbtrace-fresh/base), outside
# the clone; every run copies it to a new root, so nothing of an earlier run is seen. The chroot gets
# /proc, /sys (with tracefs and bpffs under it), /dev and /dev/pts from the host, in a private mount
# namespace that ends with the script. Logs: $FRESH_CACHE/run/logs/. Exit status: non-zero when either
# command failed.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${FRESH_CACHE:-/var/cache/gdbtrace-fresh}
base=$cache/base
root=$cache/run
logs=$cache/logs
mode=${1:-all}
[ "$(id -u)" = 0 ] || { echo "fresh-check.sh: needs root (debootstrap, chroot)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "fresh-check.sh: needs debootstrap (apt install debootstrap)" >&2; exit 2; }

# The archive the host's apt uses for a suite (as tests/install/debs.sh: no mirror is written into the tree).
archive_of() {
  apt-cache policy | awk -v s="$1/main" '$3 == s && $4 == "amd64" { print $2; exit }'
}
mirror=$(archive_of bookworm)
security=$(archive_of bookworm-security)
[ -n "$mirror" ] || { echo "fresh-check.sh: host apt has no bookworm source" >&2; exit 2; }

mkdir -p "$cache"
if [ ! -x "$base/usr/bin/apt-get" ]; then
  echo "fresh-check.sh: debootstrap bookworm into $base (once; a few minutes)"
  rm -rf "$base.tmp"
  debootstrap bookworm "$base.tmp" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
    { tail -20 "$cache/debootstrap.log"; echo "fresh-check.sh: debootstrap failed" >&2; exit 2; }
  mv "$base.tmp" "$base"
fi

if findmnt -rn -o TARGET | grep -q "^$root/"; then
  echo "fresh-check.sh: something is still mounted under $root; not removing it" >&2
  exit 2
fi
rm -rf "$root" "$logs"
mkdir -p "$logs"
cp -a "$base" "$root"
{
  echo "deb $mirror bookworm main"
  echo "deb $mirror bookworm-updates main"
  [ -n "$security" ] && echo "deb $security bookworm-security main"
} >"$root/etc/apt/sources.list"
# What a user has: a clone of the repository (committed state only), nothing built.
git clone -q --no-hardlinks "$repo" "$root/root/gdbtrace"
echo "fresh-check.sh: $(git -C "$root/root/gdbtrace" log -1 --format='%h %s') in $root/root/gdbtrace"

# Runs COMMAND as root inside the chroot, in the clone, with a login-like environment.
in_root() {
  unshare --mount --propagation private /bin/sh -ec '
    root=$1; shift
    # A real machine'"'"'s / is a mount point: the tests that make their own mount namespaces
    # (tests/install/debs.sh, the fuzz harness) change its propagation, which a plain directory refuses.
    mount --bind "$root" "$root"
    mount -t proc proc "$root/proc"
    mount --rbind /sys "$root/sys"
    mount --rbind /dev "$root/dev"
    mount -t tmpfs tmpfs "$root/tmp"
    exec chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      HOME=/root TERM=dumb LANG=C.UTF-8 /bin/bash -c "cd /root/gdbtrace && $*"' in_root "$root" "$@"
}

in_root 'apt-get -q update' >"$logs/apt-update.log" 2>&1
status=0
start=$SECONDS
echo "fresh-check.sh: scripts/demo.sh --batch (log: $logs/demo.log)"
in_root 'scripts/demo.sh --batch' >"$logs/demo.log" 2>&1
demo_rc=$?
echo "fresh-check.sh: demo exit $demo_rc after $((SECONDS - start)) s"
[ $demo_rc = 0 ] || { tail -30 "$logs/demo.log"; status=1; }
if [ "$mode" != --demo-only ]; then
  start=$SECONDS
  echo "fresh-check.sh: scripts/test.sh (log: $logs/test.log)"
  in_root 'scripts/test.sh' >"$logs/test.log" 2>&1
  test_rc=$?
  echo "fresh-check.sh: test exit $test_rc after $((SECONDS - start)) s"
  sed -n '/gdbtrace test summary/,$p' "$logs/test.log"
  [ $test_rc = 0 ] || { grep -A12 'failed; from' "$logs/test.log" | head -60; status=1; }
fi
exit $status
