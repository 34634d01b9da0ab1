#!/bin/bash
# Installs the Debian packages listed in scripts/packages.txt that are missing (one package per line;
# '#' comments allowed). Idempotent and silent when everything is already installed.
# Needs root (or sudo) only when something is missing.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
list="$repo/scripts/packages.txt"

mapfile -t wanted < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$list" | grep -v '^$' | sort -u)
missing=()
for pkg in "${wanted[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
  [ "$status" = installed ] || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "setup.sh: need root to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "setup.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Packages that ship a daemon (redis-server, for bench/redis_bpftrace.sh, which runs its own instance
# on a free port) must not start or stay enabled as system services on the user's machine: while we
# install, a policy-rc.d says no (Debian's invoke-rc.d and deb-systemd-invoke both ask it), unless the
# machine already has one; after the install the units we brought in are disabled (see the end).
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# gdbtrace scripts/setup.sh: no service starts while it installs\nexit 101\n' | $sudo tee "$policy" >/dev/null
  $sudo chmod 755 "$policy"
  trap '$sudo rm -f "$policy"' EXIT
fi
apt_opts=(-o DPkg::Lock::Timeout=600 -y -q --no-install-recommends)
# Try without refreshing the package lists first (fast path); refresh and retry if that fails.
if ! $sudo apt-get "${apt_opts[@]}" install "${missing[@]}" >/tmp/gdbtrace-setup.log 2>&1; then
  $sudo apt-get -o DPkg::Lock::Timeout=600 -q update >>/tmp/gdbtrace-setup.log 2>&1 || true
  if ! $sudo apt-get "${apt_opts[@]}" install "${missing[@]}" >>/tmp/gdbtrace-setup.log 2>&1; then
    tail -20 /tmp/gdbtrace-setup.log >&2
    echo "setup.sh: apt-get install failed (full log: /tmp/gdbtrace-setup.log)" >&2
    exit 1
  fi
fi
# The daemons installed here for the bench are not services of the machine.
for unit in redis-server; do
  if [[ " ${missing[*]} " == *" $unit "* ]] && command -v systemctl >/dev/null; then
    $sudo systemctl disable "$unit.service" >/dev/null 2>&1 || true
  fi
done
