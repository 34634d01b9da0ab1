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
/bin/gt_memcg || { note_fail "gt_memcg"; dmesg | grep gdbtrace | tail -20; }
/bin/gt_latency || { note_fail "gt_latency"; dmesg | grep gdbtrace | tail -20; }

# From here on the device is what the shipped udev rule (kmodule/60-gdbtrace.rules) makes it:
# group 4242's, mode 0660; user 1000 is in the group, user 1001 is not.
chown 0:4242 /dev/gdbtrace && chmod 0660 /dev/gdbtrace
chmod 1777 /tmp
/bin/gt_runas 1000 1000 /bin/sleep 3600 &
outside=$! # a process of user 1000 outside the namespaces below
# Namespaces: the debug and noskip kernels (tinyconfig + debug.config) have none; run.sh accepts
# their absence there only.
if [ -e /proc/self/ns/user ] && [ -e /proc/self/ns/pid ]; then
  /bin/gt_runas 1000 1000,4242 /bin/unshare -rpf --mount-proc /bin/gt_pidns $outside ||
    { note_fail "gt_pidns"; dmesg | grep gdbtrace | tail -20; }
else
  echo "GT-NO-NAMESPACES"
fi

# Server phase NAME on guest PORT (one per phase, each forwarded by run.sh, so a host gdb never
# reaches another phase's stub): starts the stub (CMD... --multi :PORT), says
# "GT-SERVER-READY NAME NOTE" once it listens, and waits until the host's gdb ends it (monitor
# exit), at most 3 minutes.
serve() { # NAME PORT NOTE CMD...
  name=$1 port=$2 note=$3 limit=900
  shift 3
  [ -f /etc/gt_many ] && [ $name = root ] && limit=15900 # thousands of tracepoints first
  "$@" --multi 0.0.0.0:$port >/tmp/server-$name.log 2>&1 &
  spid=$!
  # Ready once the socket listens (state 0A = LISTEN).
  hexport=$(printf %04X $port)
  i=0
  while ! grep -q ":$hexport 00000000:0000 0A" /proc/net/tcp && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
  echo "GT-SERVER-READY $name $note"
  i=0
  while kill -0 $spid 2>/dev/null && [ $i -lt $limit ]; do sleep 0.2; i=$((i + 1)); done
  kill $spid 2>/dev/null
  grep '^BENCH' /tmp/server-$name.log
  grep -v '^BENCH' /tmp/server-$name.log | sed "s/^/server $name: /" | tail -30
}

if [ -x /bin/gdbtrace-server ]; then
  [ -f /lib/modules/e1000.ko ] && { insmod /lib/modules/e1000.ko || note_fail "insmod e1000"; }
  [ -d /sys/class/net/eth0 ] || note_fail "no eth0"
  ip link set lo up
  ip link set eth0 up && ip addr add 10.0.2.15/24 dev eth0 && ip route add default via 10.0.2.2
  # Wait for the link (e1000 autonegotiation) so the forwarded port reaches us: up to 30 s (the
  # debug kernel under TCG on a loaded host once had no carrier after 5 s, and every gdb session
  # then timed out).
  i=0
  while [ "$(cat /sys/class/net/eth0/carrier 2>/dev/null)" != 1 ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
  echo "GT-NET $(cat /sys/class/net/eth0/carrier 2>/dev/null) $(ip -4 addr show eth0 | grep inet)"
  serve root 1234 - /bin/gdbtrace-server
  # The stub as user 1000 (the device through its group), then as that user in a rootless
  # container; the host's gdb_user.sh drives both. OTHER is a process of user 1001.
  /bin/gt_runas 1001 1001 /bin/sleep 3600 &
  serve user 1235 other=$! /bin/gt_runas 1000 1000,4242 /bin/gdbtrace-server
  if [ -e /proc/self/ns/user ]; then
    serve ns 1236 other=$outside /bin/gt_runas 1000 1000,4242 /bin/unshare -rpf --mount-proc /bin/gdbtrace-server
  else
    echo "GT-SERVER-NONE ns (no user namespaces in this kernel)"
  fi
fi

if [ -f /etc/gt_bench ] && [ -x /bin/gt_bench.sh ]; then /bin/gt_bench.sh; fi
# bench/kmodule.sh many: the kernel's floor at many uprobe sites, after the gdb sessions (minutes).
if [ -f /etc/gt_many_events ] && [ -x /bin/gt_many_floor.sh ]; then /bin/gt_many_floor.sh; fi

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
