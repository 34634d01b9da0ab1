#!/bin/bash
# Bench part driven by the host gdb (run.sh calls it when GT_BENCH is set):
# the same gt_bench loop under gdbtrace-server, `collect $regs` at site_load,
# with the module, ptrace and eBPF backends, and with eBPF also at site_nop (a
# site the kernel emulates itself): from Linux 6.19 the eBPF program emulates
# site_load's rip-relative load, so the two sites should cost about the same.
# The tracee prints its BENCH line on the guest server's stdout (init.sh echoes it).
#   gdb_bench.sh PORT WORKDIR INITRAMFS_ROOT N
set -u
port=$1 work=$2 root=$3 n=$4
for run in module:load ptrace:load ebpf:nop ebpf:load; do
  backend=${run%:*} site=${run#*:}
  cat >"$work/bench-$backend-$site.gdb" <<EOT
trace site_$site
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
    -ex "set args run $site $n gdb-$backend-collect-regs" \
    -ex "monitor gdbtrace backend $backend" \
    -ex "break main" -ex "run" \
    -ex "break exit" \
    -x "$work/bench-$backend-$site.gdb" \
    -ex "tstart" -ex "continue" -ex "tstatus" -ex "monitor gdbtrace status" -ex "tstop" -ex "kill" \
    -ex "monitor gdbtrace backend auto" \
    >"$work/bench-$backend-$site.out" 2>&1
  echo "gdb bench $backend $site: $(grep -E 'Collected [0-9]+ trace frames' "$work/bench-$backend-$site.out")" \
    "$(grep -oE 'emulated [0-9]+' "$work/bench-$backend-$site.out")"
done
