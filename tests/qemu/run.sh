#!/bin/bash
# QEMU (TCG) harness for gdbtrace.ko: for each Debian kernel series (6.1, 6.12)
# fetch the newest image+headers, build the module, build an initramfs with
# busybox + the module + test programs (+ gdbtrace-server if built), boot,
# run guest/init.sh's tests, and report. Exit status non-zero on any failure.
#
#   tests/qemu/run.sh [6.1|6.12|all]     (default all)
# Environment: GDBTRACE_BUILD=<cmake build dir with gdbtrace-server> (default build-kmod),
#              QEMU_TIMEOUT=<seconds per boot> (default 300), GT_BENCH=1 runs bench/kmodule guest part.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
work=$here/work
mkdir -p "$work"
series=${1:-all}
[ "$series" = all ] && series="6.1 6.12"

need_pkgs() {
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if [ ${#missing[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}" >&2
  fi
}
need_pkgs qemu-system-x86 busybox-static cpio gzip build-essential kmod xz-utils zstd gdb

build_guest_programs() {
  local out=$work/guest
  mkdir -p "$out"
  for src in "$here"/guest/*.c; do
    local name; name=$(basename "$src" .c)
    if [ ! -x "$out/$name" ] || [ "$src" -nt "$out/$name" ] || [ "$repo/kmodule/uapi/gdbtrace_uapi.h" -nt "$out/$name" ]; then
      gcc -O2 -g -static -Wall -I"$repo/kmodule/uapi" -o "$out/$name" "$src" || return 1
    fi
  done
}

# Copies a dynamically linked binary and the libraries ldd lists into $1.
copy_with_libs() {
  local root=$1 bin=$2 dest=$3
  install -D -m755 "$bin" "$root$dest"
  ldd "$bin" 2>/dev/null | grep -o '/[^ ]*' | while read -r lib; do
    [ -f "$lib" ] && install -D -m755 "$lib" "$root$lib"
  done
}

run_series() {
  local s=$1 log=$work/$s/console.log
  rm -f "$work/$s/gdb.log"
  echo "=== kernel $s ==="
  "$here/fetch_kernels.sh" "$s" || { echo "RESULT $s: FAIL (kernel fetch)"; return 1; }
  # shellcheck disable=SC1090
  . "$work/$s/env"
  echo "kernel $KREL"

  local bdir=$work/$s/build
  rm -rf "$bdir" && mkdir -p "$bdir"
  cp "$repo"/kmodule/{Kbuild,Makefile,*.c,*.h} "$bdir"/ && cp -r "$repo/kmodule/uapi" "$bdir"/
  if ! make -s -C "$bdir" AXDIR="$repo/gdbserver-agent/src/ax" KDIR="$KDIR" >"$work/$s/build.log" 2>&1; then
    cat "$work/$s/build.log"
    echo "RESULT $s: FAIL (module build)"
    return 1
  fi
  grep -i "warning:" "$work/$s/build.log" && echo "(module build warnings above)"

  local root=$work/$s/initramfs
  rm -rf "$root" && mkdir -p "$root"/{bin,dev,proc,sys,tmp,etc,sbin,lib/modules}
  cp /bin/busybox "$root/bin/busybox"
  cp "$bdir/gdbtrace.ko" "$root/gdbtrace.ko"
  cp "$work"/guest/* "$root/bin/"
  cp "$here/guest/init.sh" "$root/init" && chmod +x "$root/init"
  cp "$here/guest/gt_bench.sh" "$root/bin/gt_bench.sh" && chmod +x "$root/bin/gt_bench.sh"
  # NIC driver for the forwarded gdb port (e1000 is a module in Debian's config).
  local e1000; e1000=$(find "$MODDIR" -name 'e1000.ko*' | head -1)
  case "$e1000" in
    *.xz) xz -dc "$e1000" >"$root/lib/modules/e1000.ko" ;; # busybox insmod cannot decompress
    *.zst) zstd -qdc "$e1000" >"$root/lib/modules/e1000.ko" ;;
    ?*) cp "$e1000" "$root/lib/modules/e1000.ko" ;;
  esac
  local server=${GDBTRACE_BUILD:-$repo/build-kmod}/gdbserver-agent/src/server/gdbtrace-server
  if [ ! -x "$server" ]; then
    echo "SKIP gdb session: no gdbtrace-server at $server (set GDBTRACE_BUILD)"
  else
    copy_with_libs "$root" "$server" /bin/gdbtrace-server
    strip --strip-debug "$root/bin/gdbtrace-server"
  fi
  [ -n "${GT_BENCH:-}" ] && echo "${GT_BENCH}" > "$root/etc/gt_bench"
  (cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) > "$work/$s/initramfs.gz"

  local port=$((12340 + ${s//./} % 100))
  local gdbscript=$here/gdb_session.sh
  echo "booting (TCG)..."
  local start=$SECONDS
  timeout "${QEMU_TIMEOUT:-300}" qemu-system-x86_64 -accel tcg -cpu max -smp 2 -m 1024 -nographic -no-reboot \
    -kernel "$VMLINUZ" -initrd "$work/$s/initramfs.gz" \
    -append "console=ttyS0 panic=-1 oops=panic loglevel=4 gt_port=1234" \
    -netdev user,id=n0,hostfwd=tcp:127.0.0.1:$port-:1234 -device e1000,netdev=n0 \
    -serial mon:stdio </dev/null >"$log" 2>&1 &
  local qpid=$!
  # The guest announces GT-SERVER-READY when gdbtrace-server listens; drive it with the host gdb.
  if [ -x "$server" ] && [ -x "$gdbscript" ]; then
    for _ in $(seq 1 600); do
      grep -q "GT-SERVER-READY" "$log" 2>/dev/null && break
      grep -q "GT-RESULT" "$log" 2>/dev/null && break
      kill -0 $qpid 2>/dev/null || break
      sleep 0.5
    done
    if grep -q "GT-SERVER-READY" "$log"; then
      [ -n "${GT_BENCH:-}" ] && "$here/gdb_bench.sh" "$port" "$work/$s" "$root" "${GT_BENCH_GDB_N:-2000}" >"$work/$s/gdb-bench.log" 2>&1
      "$gdbscript" "$port" "$work/$s" "$root" >"$work/$s/gdb.log" 2>&1
      echo "gdb session exit $?" >>"$work/$s/gdb.log"
    fi
  fi
  wait $qpid
  local qrc=$?
  echo "boot+tests: $((SECONDS - start)) s (qemu exit $qrc)"
  sed -n 's/\r$//; /^\(ok\|FAIL\|GT-\|gt_test\|SKIP\|BENCH\)/p' "$log"
  [ -f "$work/$s/gdb.log" ] && sed -n '/^\(ok\|FAIL\|gdb session\)/p' "$work/$s/gdb.log"
  [ -n "${GT_BENCH:-}" ] && [ -f "$work/$s/gdb-bench.log" ] && cat "$work/$s/gdb-bench.log"
  if grep -q "GT-RESULT PASS" "$log" && ! grep -q "^FAIL" "$work/$s/gdb.log" 2>/dev/null; then
    echo "RESULT $s ($KREL): PASS"
    return 0
  fi
  echo "--- console tail ($log) ---"; tail -40 "$log"
  echo "RESULT $s ($KREL): FAIL"
  return 1
}

build_guest_programs || { echo "RESULT: FAIL (guest programs)"; exit 1; }
rc=0
summary=()
for s in $series; do
  if run_series "$s"; then summary+=("$s PASS"); else summary+=("$s FAIL"); rc=1; fi
done
echo "=== summary: ${summary[*]} ==="
exit $rc
