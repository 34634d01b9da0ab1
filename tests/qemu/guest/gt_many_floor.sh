#!/bin/sh
# In-guest part of bench/kmodule.sh many: the kernel's own per-hit cost at 1, 1 000 and N uprobe
# sites (tracefs uprobes, no fetch args, no module, no stub) on the functions of /bin/many, so the
# module's growth with the count of tracepoints can be told from the kernel's (a hit looks its
# uprobe up by file and offset in a tree of every uprobe). /etc/gt_many_events (written by run.sh)
# holds one `p:gtmany/fK /bin/many:OFFSET` line per function. Per round and T, the untraced loop
# over the first T functions and the same with T uprobes:
#   MANYFLOOR round=R tps=T span=T ns_per_call=X     (tps=0: untraced)
# Taking 10 000 uprobe events away again took more than 7 minutes in the 6.12 guest under TCG (each
# unregistration waits for the kernel's grace period), so the last round leaves its N events in
# place (the guest powers off next) and the default is one round.
ROUNDS=$(cat /etc/gt_many_floor 2>/dev/null); [ "$ROUNDS" -gt 0 ] 2>/dev/null || ROUNDS=1
CALLS=200000
N=$(wc -l </etc/gt_many_events)
T=/sys/kernel/tracing
[ -w $T/uprobe_events ] || { echo "SKIP gt_many_floor: no writable $T/uprobe_events"; exit 0; }
ns_of() { sed -n 's/.*ns_per_call=\([0-9.]*\).*/\1/p'; }
r=1
while [ $r -le "$ROUNDS" ]; do
  for t in 1 1000 $N; do
    per=$((CALLS / t))
    echo "MANYFLOOR round=$r tps=0 span=$t ns_per_call=$(/bin/many $per $t | ns_of)"
    # One write per line: a line cut between two writes would be parsed as two.
    head -n $t /etc/gt_many_events | while read -r line; do echo "$line" >>$T/uprobe_events; done
    echo 1 >$T/events/gtmany/enable
    echo "MANYFLOOR round=$r tps=$t span=$t ns_per_call=$(/bin/many $per $t | ns_of)"
    [ $r = "$ROUNDS" ] && [ $t = "$N" ] && break
    echo 0 >$T/events/gtmany/enable
    echo >$T/uprobe_events # truncating clears every uprobe event
  done
  r=$((r + 1))
done
