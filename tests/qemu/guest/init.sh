#!/bin/busybox sh
# PID 1 of the test guest: load gdbtrace.ko, run the ioctl-level tests, the
# gdb-driven server session (when the server is in the image), then unload the
# module and check the kernel log. Prints GT-RESULT PASS|FAIL and powers off.
/bin/busybox --install -s /bin
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
echo "GT-BOOT $(uname -r) cpus=$(nproc)"
fail=0
note_fail() { echo "FAIL $*"; fail=1; }

insmod /gdbtrace.ko || note_fail "insmod"
[ -c /dev/gdbtrace ] || note_fail "no /dev/gdbtrace"
ls -l /dev/gdbtrace | grep -q '^crw-------' || note_fail "/dev/gdbtrace mode: $(ls -l /dev/gdbtrace)"

cd /tmp
/bin/gt_test || { note_fail "gt_test"; dmesg | grep gdbtrace | tail -20; }
/bin/gt_safety || { note_fail "gt_safety"; dmesg | grep gdbtrace | tail -20; }
/bin/gt_limits || { note_fail "gt_limits"; dmesg | grep gdbtrace | tail -20; }

if [ -x /bin/gdbtrace-server ]; then
  [ -f /lib/modules/e1000.ko ] && { insmod /lib/modules/e1000.ko || note_fail "insmod e1000"; }
  [ -d /sys/class/net/eth0 ] || note_fail "no eth0"
  ip link set lo up
  ip link set eth0 up && ip addr add 10.0.2.15/24 dev eth0 && ip route add default via 10.0.2.2
  # Wait for the link (e1000 autonegotiation) so the forwarded port reaches us.
  i=0
  while [ "$(cat /sys/class/net/eth0/carrier 2>/dev/null)" != 1 ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
  echo "GT-NET $(cat /sys/class/net/eth0/carrier 2>/dev/null) $(ip -4 addr show eth0 | grep inet)"
  /bin/gdbtrace-server --multi 0.0.0.0:1234 >/tmp/server.log 2>&1 &
  spid=$!
  # Ready once the socket listens (port 1234 = 04D2, state 0A = LISTEN).
  i=0
  while ! grep -q ":04D2 00000000:0000 0A" /proc/net/tcp && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
  echo "GT-SERVER-READY"
  # The host drives the server with gdb, then connects to :1234 again with 'monitor exit' or kills it.
  # (Thousands of tracepoints first, GT_MANY: up to 50 minutes more.)
  i=0 limit=900
  [ -f /etc/gt_many ] && limit=15900
  while kill -0 $spid 2>/dev/null && [ $i -lt $limit ]; do sleep 0.2; i=$((i + 1)); done
  kill $spid 2>/dev/null
  grep '^BENCH' /tmp/server.log
  grep -v '^BENCH' /tmp/server.log | sed 's/^/server: /' | tail -30
fi

if [ -f /etc/gt_bench ] && [ -x /bin/gt_bench.sh ]; then /bin/gt_bench.sh; fi

sleep 0.2
rmmod gdbtrace || note_fail "rmmod"
# On the checking kernel (run.sh debug): show the checkers were live.
[ -e /proc/lockdep_stats ] && echo "GT-CHECKER lockdep: $(grep -m1 'lock-classes' /proc/lockdep_stats | tr -s ' ')"
dmesg | grep -q "KernelAddressSanitizer initialized" && echo "GT-CHECKER KASAN initialized"
if dmesg | grep -E "WARNING|BUG[: ]|Oops|Call Trace|general protection|UBSAN|detected stall|blocked for more than" >/tmp/bad; then
  note_fail "kernel log:"; cat /tmp/bad
fi
if [ $fail = 0 ]; then echo "GT-RESULT PASS"; else echo "GT-RESULT FAIL"; fi
sync
poweroff -f
