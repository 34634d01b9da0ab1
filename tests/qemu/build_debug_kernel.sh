#!/bin/bash
# Builds the checking guest kernel for `tests/qemu/run.sh debug` from Debian's
# linux-source-6.1: tinyconfig + debug.config (LOCKDEP, KASAN, UBSAN), cached in
# tests/qemu/work/debug (built once: ~1.3 GB of source, a long compile on two
# cores; not part of `all`). Writes work/debug/env like fetch_kernels.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$here/work/debug
mkdir -p "$work"
pkgs=(linux-source-6.1 bc bison flex libelf-dev libssl-dev)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
[ ${#missing[@]} -eq 0 ] || DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}" >&2
src=$work/src
if [ ! -f "$src/Makefile" ]; then
  rm -rf "$src" && mkdir -p "$src"
  tar -xaf /usr/src/linux-source-6.1.tar.xz -C "$src" --strip-components=1
fi
if [ ! -f "$src/.config" ] || [ "$here/debug.config" -nt "$src/.config" ]; then
  make -s -C "$src" tinyconfig >&2
  "$src/scripts/kconfig/merge_config.sh" -m -O "$src" "$src/.config" "$here/debug.config" >&2
  make -s -C "$src" olddefconfig >&2
  for opt in KASAN PROVE_LOCKING UBSAN UPROBES E1000 MODULES IA32_EMULATION PREEMPT DEBUG_PREEMPT DEBUG_ATOMIC_SLEEP; do
    grep -q "^CONFIG_$opt=y" "$src/.config" || { echo "debug kernel config lacks CONFIG_$opt" >&2; exit 1; }
  done
fi
. "$here/kernel_env.sh"
build_kernel_and_env "$src" "$work"
