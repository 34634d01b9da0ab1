#!/bin/bash
# Drives the guest's unprivileged gdbtrace-server (uid 1000, /dev/gdbtrace through group 4242 as
# the shipped udev rule grants it) with the host's gdb, for one of init.sh's server phases:
#   user  the stub as that user: tracepoints on a program it runs get the module collector (the
#         stub's status says so), and attaching to another user's process is refused with the
#         reason;
#   ns    the same stub inside new user+pid+mount namespaces (`unshare -rpf --mount-proc`, a
#         rootless container): the module collector works on its tracee (pid 2 of the namespace:
#         the module reads pids in the caller's namespace), and a same-user process outside the
#         namespace cannot be named (attach: no such process).
# A refused attach is "Attaching to process N failed" in gdb 13, whatever the reason: the reason is
# checked in the stub's log, which init.sh copies to the console.
# Prints "ok gdb_PHASE_NAME" / "FAIL gdb_PHASE_NAME: why" lines (run.sh collects them).
#   gdb_user.sh PORT WORKDIR INITRAMFS_ROOT PHASE OTHER_PID
set -u
port=$1 work=$2 root=$3 phase=$4 other=$5
prog=$root/bin/gt_loop
out=$work/gdb-$phase.out
N=200

. "$(cd "$(dirname "$0")" && pwd)/gdb_lib.sh"
check() { check_output "gdb_${phase}_$1" "$2" "$out"; } # name pattern

cat >"$work/$phase.gdb" <<EOT
trace probe_me
actions
collect a
end
EOT
guest_gdb 240 "$out" "$prog" /bin/gt_loop "$N" \
  -ex "monitor gdbtrace backend" \
  -ex "echo TRACEE-PID: " -ex "info inferiors" \
  -ex "break done" \
  -x "$work/$phase.gdb" \
  -ex "tstart" \
  -ex "continue" \
  -ex "monitor gdbtrace status" \
  -ex "tstop" \
  -ex "tstatus" \
  -ex "tfind 123" \
  -ex "echo A123: " -ex "output a" -ex "echo \\n" \
  -ex "tfind none" \
  -ex "kill" \
  -ex "echo OTHER: \\n" \
  -ex "attach $other" \
  -ex "echo AFTER-ATTACH\\n" \
  -ex "monitor exit"

check module_available "module: "
check module_backend "tracepoint [0-9]+ at 0x[0-9a-f]+: backend module, hits $N, frames $N"
check frames "Collected $N trace frames"
check frame_123 "A123: ?123$"
check attach_refused "Attaching to process $other failed"
# gdb 13 shows no reason for a failed attach; the stub logs it (guest/init.sh copies its log to the
# console once it exited, after `monitor exit`).
if [ "$phase" = ns ]; then
  why="no such process: $other"
else
  why="cannot attach to process $other: Operation not permitted"
fi
for _ in $(seq 1 120); do
  grep -q "server $phase: gdbtrace-server: " "$work/console.log" && break
  sleep 0.5
done
if grep -q "server $phase: gdbtrace-server: $why" "$work/console.log"; then
  echo "ok gdb_${phase}_attach_reason"
else
  echo "FAIL gdb_${phase}_attach_reason: the stub's log says no '$why' ($work/console.log)"
fi
if [ "$phase" = ns ]; then
  # The tracee's pid as the stub (and so the module) saw it: the namespace's second process.
  check tracee_pid_in_namespace "^\* 1 +process 2 "
fi
