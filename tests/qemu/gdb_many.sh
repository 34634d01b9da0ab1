#!/bin/bash
# Thousands of tracepoints on the module in the guest (run.sh calls it when GT_MANY=N is set):
# the host gdb runs /bin/many (tests/programs/many_functions.py, N functions, built static by
# run.sh) under the guest's gdbtrace-server, sources the script with `trace fK` + `collect v` for
# each, and times tstart and tstop from gdb. Prints (to its log, which run.sh shows):
#   many BACKEND N=... rounds=... tstart_s=... tstop_s=... frames=... drops=... on_BACKEND=...
# (+ the tracee's BENCH line, ns per call with the tracepoints in, on the guest console)
# and "ok gdb_many" or "FAIL gdb_many: why". The trace buffer is 128 MB, so the rings (half of it)
# hold every frame of the default 200 000 hits even if the stub drains none during the run.
#   gdb_many.sh PORT WORKDIR INITRAMFS_ROOT N
# Environment: GT_MANY_BACKEND (default module; ebpf, ptrace, auto), GT_MANY_ROUNDS (calls of each
#   function; default 200000/N, at least 1).
set -u
port=$1 work=$2 root=$3 n=$4
backend=${GT_MANY_BACKEND:-module}
rounds=${GT_MANY_ROUNDS:-$(( 200000 / n > 0 ? 200000 / n : 1 ))}
out=$work/gdb-many.out
# The remote timeout covers a tstart of thousands of probes in a TCG guest (gdb's default is 2 s).
timeout 3000 /usr/bin/gdb -nx -batch \
  -ex "set pagination off" -ex "set confirm off" -ex "set auto-connect-native off" \
  -ex "set remotetimeout 600" -ex "set trace-buffer-size 128000000" \
  -ex "file $root/bin/many" \
  -ex "target extended-remote 127.0.0.1:$port" \
  -ex "set remote exec-file /bin/many" \
  -ex "set args $rounds" \
  -ex "monitor gdbtrace backend $backend" \
  -ex "break main" -ex "run" -ex "break done" \
  -x "$work/many.gdb" \
  -ex "python import time; t0 = time.time()" -ex "tstart" \
  -ex "python print('MANY tstart_s %.2f' % (time.time() - t0))" \
  -ex "continue" -ex "tstatus" \
  -ex "pipe monitor gdbtrace status | grep -c '^tracepoint .*: backend $backend,' | sed 's/^/MANY on_backend /'" \
  -ex "pipe monitor gdbtrace status | grep -o 'drops [0-9]*' | awk '{d+=\$2} END {print \"MANY drops\", d+0}'" \
  -ex "python t0 = time.time()" -ex "tstop" \
  -ex "python print('MANY tstop_s %.2f' % (time.time() - t0))" \
  -ex "kill" -ex "monitor gdbtrace backend auto" \
  >"$out" 2>&1
tstart=$(sed -n 's/^MANY tstart_s //p' "$out")
tstop=$(sed -n 's/^MANY tstop_s //p' "$out")
on=$(sed -n 's/^MANY on_backend //p' "$out")
drops=$(sed -n 's/^MANY drops //p' "$out")
frames=$(grep -oE 'Collected [0-9]+ trace frames' "$out" | grep -oE '[0-9]+')
echo "many $backend N=$n rounds=$rounds tstart_s=${tstart:-?} tstop_s=${tstop:-?} frames=${frames:-?} drops=${drops:-?} on_$backend=${on:-?}"
if [ "${on:-0}" = "$n" ] && [ "${frames:-0}" = $((n * rounds)) ]; then
  echo "ok gdb_many"
else
  echo "FAIL gdb_many: want $n tracepoints on $backend and $((n * rounds)) frames, no drops (see $out)"
fi
