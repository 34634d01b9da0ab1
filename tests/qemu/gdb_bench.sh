#!/bin/bash
# Bench part driven by the host gdb (run.sh calls it when GT_BENCH is set):
# the same gt_bench loop under gdbtrace-server, `collect $regs` at site_load,
# once with the module backend and once with the ptrace backend. The tracee
# prints its BENCH line on the guest server's stdout (init.sh echoes it).
#   gdb_bench.sh PORT WORKDIR INITRAMFS_ROOT N
set -u
port=$1 work=$2 root=$3 n=$4
for backend in module ptrace; do
  cat >"$work/bench-$backend.gdb" <<EOT
trace site_load
actions
collect \$regs
end
EOT
  timeout 600 /usr/bin/gdb -nx -batch \
    -ex "set pagination off" -ex "set confirm off" -ex "set auto-connect-native off" \
    -ex "set trace-buffer-size 200000000" \
    -ex "file $root/bin/gt_bench" \
    -ex "target extended-remote 127.0.0.1:$port" \
    -ex "set remote exec-file /bin/gt_bench" \
    -ex "set args run load $n gdb-$backend-collect-regs" \
    -ex "monitor gdbtrace backend $backend" \
    -ex "break main" -ex "run" \
    -ex "break exit" \
    -x "$work/bench-$backend.gdb" \
    -ex "tstart" -ex "continue" -ex "tstatus" -ex "tstop" -ex "kill" \
    -ex "monitor gdbtrace backend auto" \
    >"$work/bench-$backend.out" 2>&1
  echo "gdb bench $backend: $(grep -E 'Collected [0-9]+ trace frames' "$work/bench-$backend.out")"
done
