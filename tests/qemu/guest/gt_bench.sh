#!/bin/sh
# In-guest part of bench/kmodule.sh: untraced, tracefs uprobe (raw floor) and
# gdbtrace.ko (ioctl level, 'R' block per hit) on the same loop, for the nop
# site (kernel-emulated) and the rip-load site (single-stepped unless emulated);
# on the load site also with the x87/SSE/AVX registers in the block.
N=$(cat /etc/gt_bench 2>/dev/null); [ "$N" -gt 0 ] 2>/dev/null || N=20000
T=/sys/kernel/tracing
cd /tmp
for site in nop load; do
  gt_bench run $site $N untraced
  off=$(gt_bench offsets | sed -n "s/^$site //p")
  if [ -w $T/uprobe_events ]; then
    echo "p:gtbench/$site /bin/gt_bench:$off" >> $T/uprobe_events
    echo 1 > $T/events/gtbench/$site/enable
    gt_bench run $site $N tracefs-uprobe
    echo 0 > $T/events/gtbench/$site/enable
    echo "-:gtbench/$site" >> $T/uprobe_events
  fi
  gt_bench module $site $N noemu
  [ $site = load ] && gt_bench module $site $N
  # collect $regs with the x87/SSE/AVX state: the FPU save at each hit
  [ $site = load ] && gt_bench module $site $N fpu
done
