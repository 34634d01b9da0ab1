#!/bin/bash
# Finds the newest Debian kernel image + headers pair for a series (6.1 or 6.12),
# installs the headers and extracts the image into tests/qemu/work/<series>/.
# Prints nothing on success but writes work/<series>/env (KREL, KDIR, VMLINUZ, MODDIR).
set -euo pipefail
series=$1
here=$(cd "$(dirname "$0")" && pwd)
work=$here/work/$series
mkdir -p "$work"

case $series in
  6.1)  pat='^linux-image-6\.1\.0-[0-9]+-amd64-unsigned$' ;;
  6.12) pat='^linux-image-6\.12\.[0-9]+\+deb12-amd64-unsigned$' ;;
  *) echo "unknown series $series" >&2; exit 2 ;;
esac

# Newest image whose headers package also exists.
krel=
for img in $(apt-cache search --names-only "$pat" | awk '{print $1}' | sort -rV); do
  rel=${img#linux-image-}; rel=${rel%-unsigned}
  if apt-cache show "linux-headers-$rel" >/dev/null 2>&1; then krel=$rel; break; fi
done
if [ -z "$krel" ]; then
  echo "no linux-image/linux-headers pair for $series in the apt archive" >&2
  exit 1
fi

if [ ! -d "/usr/src/linux-headers-$krel" ]; then
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "linux-headers-$krel" >&2
fi
if [ ! -f "$work/root/boot/vmlinuz-$krel" ]; then
  (cd "$work" && rm -f linux-image-*.deb && apt-get download -q "linux-image-$krel-unsigned" >&2)
  rm -rf "$work/root"
  dpkg-deb -x "$work"/linux-image-"$krel"-unsigned_*.deb "$work/root"
  rm -f "$work"/linux-image-*.deb
fi
cat > "$work/env" <<EOT
KREL=$krel
KDIR=/usr/src/linux-headers-$krel
VMLINUZ=$work/root/boot/vmlinuz-$krel
MODDIR=$work/root/lib/modules/$krel
EOT
