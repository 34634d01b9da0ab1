#!/bin/bash
# QEMU (TCG) harness for gdbtrace.ko: for each kernel series -- Debian 12's 6.1
# and 6.12, "newest", Debian unstable's current kernel (7.x today, looked up
# again every run), and "rt", Debian 12's PREEMPT_RT 6.1 -- fetch the kernel, build the module against its headers
# (newest: inside a cached sid chroot, with that kernel's own gcc), build an
# initramfs with busybox + the module + test programs (+ gdbtrace-server if
# built), boot, run guest/init.sh's tests, and report with the kernel version.
# Exit status non-zero on any failure.
#
#   tests/qemu/run.sh [6.1|6.12|newest|rt|rt612|all|debug|noskip]...
#   (default all = 6.1 6.12 newest rt rt612, + debug and noskip when cached)
# `rt612` is Debian's PREEMPT_RT 6.12. `debug` is a 6.1 kernel built here from
# linux-source with LOCKDEP, KASAN, UBSAN, DEBUG_ATOMIC_SLEEP and DEBUG_PREEMPT
# (build_debug_kernel.sh): a long one-off compile, which `all` never starts;
# `all` runs it (and noskip) when the build is cached, and says so. `noskip`
# is that kernel without the uprobe single-step skip of upstream 4363264111e1
# (build_noskip_kernel.sh), where the module must refuse emulation.
# Environment: GDBTRACE_BUILD=<cmake build dir with gdbtrace-server> (default build-kmod),
#              GDBTRACE_KO_DIR=DIR: boot DIR/<series>/gdbtrace.ko (prebuilt, e.g. by DKMS)
#                instead of building the module; missing -> failure,
#              QEMU_TIMEOUT=<seconds per boot> (default 480), GT_BENCH=1 runs bench/kmodule guest part,
#              GT_MANY=N: before the gdb session, N tracepoints (one per function of a generated
#                program) on the module through the host gdb (gdb_many.sh; GT_MANY_BACKEND,
#                GT_MANY_ROUNDS); give it QEMU_TIMEOUT=3000 for N=10000,
#              GT_MANY_BENCH=ROUNDS (with GT_MANY=N): gdb_many_bench.sh instead, 1, 1 000 and N
#                tracepoints against none, ROUNDS rounds in this boot (bench/kmodule.sh many), and
#                the guest's tracefs floor at the same sites (GT_MANY_FLOOR_ROUNDS, default 1),
#              CI=true or GDBTRACE_STRICT=1: a missing kernel, a failed fetch or a skipped gdb
#                session is a failure.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
work=$here/work
mkdir -p "$work"
series=" ${*:-all} "
cached_series=
# `all`: the stock kernels, and the checking kernels (debug, noskip) whenever their build is
# cached: used as cached (GT_CACHED_ONLY), never compiled here -- the first build is a long
# compile on two cores, which `run.sh debug` starts.
if [[ $series == *" all "* ]]; then
  all="6.1 6.12 newest rt rt612"
  for k in debug noskip; do
    [[ $series == *" $k "* ]] && continue
    if why=$(. "$here/kernel_env.sh" && cached_kernel_env "$work/$k" 2>&1); then
      all+=" $k"
      cached_series+=" $k "
      echo "all: includes $k, its cached build in $(readlink -f "$work/$k")"
    else
      echo "all: without $k: $why"
    fi
  done
  series=${series// all / $all }
fi
ci=false
# scripts/test.sh's GDBTRACE_STRICT=1 too: green from the README's command must mean tested.
{ [ "${CI:-}" = true ] || [ "${GDBTRACE_STRICT:-}" = 1 ]; } && ci=true

need_pkgs() {
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if [ ${#missing[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}" >&2
  fi
}
# gcc-multilib: the guest's 32-bit tracee (a -m32 process is never emulated).
need_pkgs qemu-system-x86 busybox-static cpio gzip build-essential gcc-multilib kmod xz-utils zstd gdb debootstrap

# The guest programs of this checkout: work/ is a cache several checkouts share, and binaries
# rebuilt only when their source is newer would let one checkout boot another's tests.
guest_bin=$work/guest/$(printf %s "$repo" | md5sum | cut -c1-12)
build_guest_programs() {
  local out=$guest_bin
  mkdir -p "$out"
  for src in "$here"/guest/*.c; do
    local name flags=; name=$(basename "$src" .c)
    case $name in *32) flags=-m32 ;; esac
    if [ ! -x "$out/$name" ] || [ "$src" -nt "$out/$name" ] || [ "$here/guest/gt_util.h" -nt "$out/$name" ] ||
      [ "$repo/tests/programs/bench_stacks.c" -nt "$out/$name" ] ||
      [ "$repo/kmodule/uapi/gdbtrace_uapi.h" -nt "$out/$name" ]; then
      gcc $flags -O2 -g -static -pthread -Wall -I"$repo/kmodule/uapi" -o "$out/$name" "$src" -lpthread || return 1
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

# Builds gdbtrace.ko for the fetched kernel (or takes the prebuilt one from
# GDBTRACE_KO_DIR) and prints its path. The build copies kmodule/ and runs its
# `prepare`, so it proves the self-contained (DKMS) tree builds with only the
# kernel headers; the newest kernel builds inside the sid chroot.
build_module() {
  local s=$1 bdir=$work/$s/build
  if [ -n "${GDBTRACE_KO_DIR:-}" ]; then
    [ -f "$GDBTRACE_KO_DIR/$s/gdbtrace.ko" ] || { echo "no $GDBTRACE_KO_DIR/$s/gdbtrace.ko" >&2; return 1; }
    echo "$GDBTRACE_KO_DIR/$s/gdbtrace.ko"
    return 0
  fi
  rm -rf "$bdir" && mkdir -p "$bdir"
  cp -r "$repo"/kmodule/{Kbuild,Makefile,*.c,*.h,uapi} "$bdir"/
  make -s -C "$bdir" SRCROOT="$repo" prepare >&2 || return 1
  local version; version=$(sed -n 's/^project.gdbtrace VERSION \([0-9.]*\).*/\1/p' "$repo/CMakeLists.txt")
  local rc=0
  if [ -n "$CHROOT" ]; then
    rm -rf "$CHROOT/tmp/gt-kmod" && cp -r "$bdir" "$CHROOT/tmp/gt-kmod"
    local mounted=false # objtool reads /proc/self
    mountpoint -q "$CHROOT/proc" || { mount -t proc proc "$CHROOT/proc" && mounted=true; }
    chroot "$CHROOT" /usr/bin/env -i PATH=/usr/bin:/bin make -s -C /tmp/gt-kmod KDIR="$KDIR" \
      GDBTRACE_VERSION="$version" >"$work/$s/build.log" 2>&1 || rc=1
    $mounted && umount "$CHROOT/proc"
    cp "$CHROOT/tmp/gt-kmod/gdbtrace.ko" "$bdir/" 2>/dev/null
    rm -rf "$CHROOT/tmp/gt-kmod"
  else
    make -s -C "$bdir" KDIR="$KDIR" GDBTRACE_VERSION="$version" >"$work/$s/build.log" 2>&1 || rc=1
  fi
  if [ $rc != 0 ] || [ ! -f "$bdir/gdbtrace.ko" ]; then
    cat "$work/$s/build.log" >&2
    return 1
  fi
  grep -i "warning:" "$work/$s/build.log" >&2 && echo "(module build warnings above)" >&2
  echo "$bdir/gdbtrace.ko"
}

# Waits up to 5 minutes for a console line matching PATTERN (grep); false once the guest ended.
wait_console() { # LOG QEMU_PID PATTERN
  for _ in $(seq 1 600); do
    grep -q "$3" "$1" 2>/dev/null && return 0
    grep -q "GT-RESULT" "$1" 2>/dev/null && return 1
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.5
  done
  return 1
}

run_series() {
  local s=$1 log=$work/$s/console.log
  rm -f "$work/$s/gdb.log"
  echo "=== kernel $s ==="
  KREL= CHROOT=
  local cached=; [[ ${cached_series:-} == *" $s "* ]] && cached=1
  GT_CACHED_ONLY=$cached "$here/fetch_kernels.sh" "$s" || { echo "RESULT $s: FAIL (kernel fetch)"; return 1; }
  # shellcheck disable=SC1090
  . "$work/$s/env"
  echo "kernel $KREL"

  local ko
  ko=$(build_module "$s") || { echo "RESULT $s ($KREL): FAIL (module build)"; return 1; }
  local root=$work/$s/initramfs
  rm -rf "$root" && mkdir -p "$root"/{bin,dev,proc,sys,tmp,etc,sbin,lib/modules}
  cp /bin/busybox "$root/bin/busybox"
  cp "$ko" "$root/gdbtrace.ko"
  cp "$guest_bin"/* "$root/bin/"
  cp "$here/guest/init.sh" "$root/init" && chmod +x "$root/init"
  cp "$here/guest/gt_bench.sh" "$root/bin/gt_bench.sh" && chmod +x "$root/bin/gt_bench.sh"
  # NIC driver for the forwarded gdb port (e1000 is a module in Debian's config).
  local e1000; e1000=$(find "$MODDIR" -name 'e1000.ko*' | head -1) # (built in: none)
  case "$e1000" in
    *.xz) xz -dc "$e1000" >"$root/lib/modules/e1000.ko" ;; # busybox insmod cannot decompress
    *.zst) zstd -qdc "$e1000" >"$root/lib/modules/e1000.ko" ;;
    ?*) cp "$e1000" "$root/lib/modules/e1000.ko" ;;
  esac
  local server=${GDBTRACE_BUILD:-$repo/build-kmod}/gdbserver-agent/src/server/gdbtrace-server
  if [ ! -x "$server" ]; then
    echo "SKIP gdb session: no gdbtrace-server at $server (set GDBTRACE_BUILD)"
    $ci && { echo "RESULT $s ($KREL): FAIL (CI=true or GDBTRACE_STRICT=1, and no gdbtrace-server)"; return 1; }
  else
    copy_with_libs "$root" "$server" /bin/gdbtrace-server
    strip --strip-debug "$root/bin/gdbtrace-server"
  fi
  [ -n "${GT_BENCH:-}" ] && echo "${GT_BENCH}" > "$root/etc/gt_bench"
  if [ -n "${GT_MANY:-}" ]; then # the program and gdb script of gdb_many.sh
    python3 "$repo/tests/programs/many_functions.py" "$GT_MANY" "$work/$s/many.c" "$work/$s/many.gdb" &&
      gcc -O1 -g -fno-inline -static -o "$root/bin/many" "$work/$s/many.c" || return 1
    echo "$GT_MANY" >"$root/etc/gt_many" # the guest waits longer for the server
    if [ -n "${GT_MANY_BENCH:-}" ]; then # gt_many_floor.sh: a tracefs uprobe on each function
      cp "$here/guest/gt_many_floor.sh" "$root/bin/" && echo "${GT_MANY_FLOOR_ROUNDS:-1}" >"$root/etc/gt_many_floor"
      # File offset = address - (the text segment's address - its offset): /bin/many is static.
      read -r off vaddr < <(readelf -lW "$root/bin/many" | awk '$1 == "LOAD" && / E / {print $2, $3; exit}')
      delta=$((vaddr - off))
      nm "$root/bin/many" | awk '$3 ~ /^f[0-9]+$/ {printf "%d %s\n", substr($3, 2), $1}' |
        sort -n | while read -r k a; do printf 'p:gtmany/f%d /bin/many:0x%x\n' "$k" $((0x$a - delta)); done \
        >"$root/etc/gt_many_events"
    fi
  fi
  (cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) > "$work/$s/initramfs.gz"

  # A port the host has free now: fixed ports made two runs on one host (a
  # developer's and a clean-root check sharing its network) fail each other's
  # boot ("Could not set up host forwarding rule").
  # One for each of guest/init.sh's server phases (root :1234, user :1235, ns :1236).
  local port port_user port_ns
  read -r port port_user port_ns < <(python3 -c 'import socket
ss = [socket.socket() for _ in range(3)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in ss))')
  local gdbscript=$here/gdb_session.sh
  echo "booting (TCG)..."
  # no_timer_check: on a loaded host TCG can miss the kernel's early IO-APIC timer check, which
  # then panics ("IO-APIC + timer doesn't work", seen on 6.1) before anything of ours runs.
  local start=$SECONDS
  timeout "${QEMU_TIMEOUT:-480}" qemu-system-x86_64 -accel tcg -cpu max -smp 2 -m 1024 -nographic -no-reboot \
    -kernel "$VMLINUZ" -initrd "$work/$s/initramfs.gz" \
    -append "console=ttyS0 panic=-1 oops=panic loglevel=4 no_timer_check gt_port=1234" \
    -netdev user,id=n0,hostfwd=tcp:127.0.0.1:$port-:1234,hostfwd=tcp:127.0.0.1:$port_user-:1235,hostfwd=tcp:127.0.0.1:$port_ns-:1236 \
    -device e1000,netdev=n0 \
    -serial mon:stdio </dev/null >"$log" 2>&1 &
  local qpid=$!
  # The guest announces GT-SERVER-READY when gdbtrace-server listens; drive it with the host gdb.
  if [ -x "$server" ] && [ -x "$gdbscript" ]; then
    if wait_console "$log" $qpid "GT-SERVER-READY root"; then
      [ -n "${GT_BENCH:-}" ] && "$here/gdb_bench.sh" "$port" "$work/$s" "$root" "${GT_BENCH_GDB_N:-2000}" >"$work/$s/gdb-bench.log" 2>&1
      if [ -n "${GT_MANY:-}" ]; then
        many=gdb_many.sh; [ -n "${GT_MANY_BENCH:-}" ] && many=gdb_many_bench.sh
        "$here/$many" "$port" "$work/$s" "$root" "$GT_MANY" >"$work/$s/gdb-many.log" 2>&1
      fi
      "$gdbscript" "$port" "$work/$s" "$root" >"$work/$s/gdb.log" 2>&1
      echo "gdb session exit $?" >>"$work/$s/gdb.log"
      # The unprivileged stub, then the same in a rootless container (guest/init.sh's phases).
      local phase other
      for phase in user ns; do
        if wait_console "$log" $qpid "GT-SERVER-\(READY\|NONE\) $phase"; then
          if grep -q "GT-SERVER-NONE $phase" "$log"; then
            echo "SKIP gdb_$phase: $(sed -n "s/.*GT-SERVER-NONE $phase \(.*\)\r*$/\1/p" "$log")" >>"$work/$s/gdb.log"
            continue
          fi
          other=$(sed -n "s/.*GT-SERVER-READY $phase other=\([0-9]*\).*/\1/p" "$log")
          local phase_port=$port_user; [ $phase = ns ] && phase_port=$port_ns
          "$here/gdb_user.sh" "$phase_port" "$work/$s" "$root" "$phase" "$other" >>"$work/$s/gdb.log" 2>&1
        else
          echo "FAIL gdb_$phase: the guest never started its $phase server" >>"$work/$s/gdb.log"
        fi
      done
    fi
  fi
  wait $qpid
  local qrc=$?
  echo "boot+tests: $((SECONDS - start)) s (qemu exit $qrc)"
  sed -n 's/\r$//; /^\(ok\|FAIL\|GT-\|gt_test\|gt_safety\|gt_limits\|gt_memcg\|gt_latency\|gt_pidns\|SKIP\|BENCH\|MANYFLOOR\)/p' "$log"
  [ -f "$work/$s/gdb.log" ] && sed -n '/^\(ok\|FAIL\|SKIP\|gdb session\)/p' "$work/$s/gdb.log"
  [ -n "${GT_MANY:-}" ] && cat "$work/$s/gdb-many.log"
  [ -n "${GT_BENCH:-}" ] && [ -f "$work/$s/gdb-bench.log" ] && cat "$work/$s/gdb-bench.log"
  # Under CI or GDBTRACE_STRICT=1 a skipped guest test (e.g. no 32-bit support) is a failure.
  if $ci && grep -q "^SKIP" "$log"; then
    grep "^SKIP" "$log"
    echo "RESULT $s ($KREL): FAIL (CI=true or GDBTRACE_STRICT=1, and a guest test was skipped)"
    return 1
  fi
  # The container tests need user and pid namespaces: only the checking kernels are built without.
  if grep -q "GT-NO-NAMESPACES" "$log"; then
    case $s in
      debug | noskip) echo "SKIP gt_pidns, gdb_ns: the $s kernel is built without namespaces (debug.config)" ;;
      *) echo "RESULT $s ($KREL): FAIL (a kernel without user/pid namespaces: the container tests did not run)"; return 1 ;;
    esac
  fi
  local gdb_ok=true
  if [ -x "$server" ]; then
    grep -q "^ok gdb_" "$work/$s/gdb.log" 2>/dev/null || gdb_ok=false
    grep -q "^FAIL" "$work/$s/gdb.log" 2>/dev/null && gdb_ok=false
    case $s in debug | noskip) ;; *) grep -q "^SKIP gdb_ns" "$work/$s/gdb.log" 2>/dev/null && gdb_ok=false ;; esac
    [ -n "${GT_MANY:-}" ] && ! grep -q "^ok gdb_many" "$work/$s/gdb-many.log" 2>/dev/null && gdb_ok=false
  fi
  if grep -q "GT-RESULT PASS" "$log" && $gdb_ok; then
    echo "RESULT $s ($KREL): PASS"
    return 0
  fi
  echo "--- console tail ($log) ---"; tail -40 "$log"
  echo "RESULT $s ($KREL): FAIL"
  return 1
}

# An "Oops: int3" whose call trace has no frame of ours (seen in __schedule on 6.12, once in several
# runs, right after a guest test armed a hardware watchpoint: that flips perf's static key, and
# the kernel patches its own text with a temporary int3 that another TCG vCPU can still execute).
tcg_text_patch_oops() {
  grep -q "Oops: int3" "$1" || return 1
  ! awk '/Oops: int3/ {o=1} o && /Call Trace:/ {t=1} t && /<\/TASK>/ {exit} t' "$1" | grep -q "gdbtrace\|gt_"
}

build_guest_programs || { echo "RESULT: FAIL (guest programs)"; exit 1; }
rc=0
summary=()
for s in $series; do
  if run_series "$s"; then
    r=PASS
  elif tcg_text_patch_oops "$work/$s/console.log"; then
    # Not hidden: the first console is kept and the summary says the series needed a second boot.
    cp "$work/$s/console.log" "$work/$s/console-oops.log"
    echo "RETRY $s: kernel int3 Oops in its own text patching, no gdbtrace frame in the trace" \
      "(TCG; first console: $work/$s/console-oops.log); booting once more"
    if run_series "$s"; then r="PASS (second boot after a TCG text-patching Oops)"; else r=FAIL; rc=1; fi
  else
    r=FAIL
    rc=1
  fi
  summary+=("$s (${KREL:-no kernel}) $r")
done
echo "=== summary: $(IFS=,; echo "${summary[*]}" | sed 's/,/, /g') ==="
exit $rc
