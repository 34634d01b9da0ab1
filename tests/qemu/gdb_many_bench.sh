#!/bin/bash
# Per-hit cost of 1, 1 000 and N tracepoints on the module against none, in one guest boot (run.sh
# calls it instead of gdb_many.sh when GT_MANY=N and GT_MANY_BENCH=ROUNDS are set; bench/kmodule.sh
# many makes judged rows of its lines). The program is gdb_many.sh's (/bin/many, N functions from
# tests/programs/many_functions.py); a session with T tracepoints runs it over the first T functions
# (SPAN = T) with `trace fK` + `collect v` on each, so every call is one hit on the same kind of site
# (a `nop` first); the untraced session at the same span is the baseline (a loop over 10 000
# functions pays instruction-cache misses a loop over one does not). Each round runs untraced and
# traced sessions for every T, so a round's ratio compares runs minutes apart at most.
# One line per session:
#   MANYROW round=R tps=T span=S calls=C ns_per_call=X tstart_s=.. qtstart_s=.. tstop_s=..
#           frames=.. drops=.. on_module=.. vmhwm_kb=.. vmrss_kb=..
# (tps=0: untraced; qtstart_s: the stub's QTStart alone, the reply's time after the request in a
# `set debug remote` log, taken in the last round's traced sessions only; the other rounds' tstart_s
# is gdb's whole tstart without that logging), then "ok gdb_many" or "FAIL gdb_many: why".
#   gdb_many_bench.sh PORT WORKDIR INITRAMFS_ROOT N
# Environment: GT_MANY_BENCH (rounds, default 3), GT_MANY_CALLS (calls per session, default 200 000:
#   under TCG a module hit costs a few microseconds, so a session's loop takes about a second or
#   two; the sessions' time is gdb defining the tracepoints and tstart), GT_MANY_TPS (default
#   "1 1000 N").
set -u
port=$1 work=$2 root=$3 n=$4
rounds=${GT_MANY_BENCH:-3}
calls=${GT_MANY_CALLS:-200000}
tps_list=${GT_MANY_TPS:-1 1000 $n}
buffer=128000000
fail=

session() { # ROUND TPS DEBUG(0|1)
  local round=$1 tps=$2 debug=$3 span=$2 out=$work/gdb-many-bench.out dbg=$work/gdb-many-bench.dbg
  [ "$tps" = 0 ] && span=$n
  [ "${4:-}" ] && span=$4
  local per=$((calls / span > 0 ? calls / span : 1))
  local trace=()
  if [ "$tps" != 0 ]; then
    head -n $((4 * tps)) "$work/many.gdb" >"$work/many-$tps.gdb"
    trace=(-x "$work/many-$tps.gdb")
    [ "$debug" = 1 ] && trace+=(-ex "set debug timestamp on" -ex "set debug remote 1")
    trace+=(-ex "python import time; t0 = time.time()" -ex "tstart"
      -ex "python print('MANY tstart_s %.2f' % (time.time() - t0))" -ex "set debug remote 0")
  fi
  local after=()
  if [ "$tps" != 0 ]; then
    after=(-ex "tstatus"
      -ex "pipe monitor gdbtrace status | grep -c '^tracepoint .*: backend module,' | sed 's/^/MANY on_backend /'"
      -ex "pipe monitor gdbtrace status | grep -o 'drops [0-9]*' | awk '{d+=\$2} END {print \"MANY drops\", d+0}'"
      -ex "remote get /proc/self/status $work/stub-status"
      -ex "python t0 = time.time()" -ex "tstop"
      -ex "python print('MANY tstop_s %.2f' % (time.time() - t0))")
  fi
  # The remote timeout covers a tstart of thousands of probes in a TCG guest (gdb's default is 2 s).
  timeout 1500 /usr/bin/gdb -nx -batch \
    -ex "set pagination off" -ex "set confirm off" -ex "set auto-connect-native off" \
    -ex "set remotetimeout 600" -ex "set trace-buffer-size $buffer" \
    -ex "file $root/bin/many" \
    -ex "target extended-remote 127.0.0.1:$port" \
    -ex "set remote exec-file /bin/many" \
    -ex "set args $per $span" \
    -ex "monitor gdbtrace backend module" \
    -ex "break main" -ex "run" -ex "break done" \
    "${trace[@]}" \
    -ex "continue" \
    -ex "python print('MANY ns_per_call %s' % gdb.parse_and_eval('bench_ns_per_call'))" \
    "${after[@]}" \
    -ex "kill" -ex "monitor gdbtrace backend auto" \
    >"$out" 2>"$dbg"
  local get; get() { sed -n "s/^MANY $1 //p" "$out" | tail -1; }
  local frames qt=
  frames=$(grep -oE 'Collected [0-9]+ trace frames' "$out" | grep -oE '[0-9]+' | tail -1)
  # The reply to QTStart: gdb's debug lines start with a timestamp in seconds.
  [ "$debug" = 1 ] && qt=$(awk '/Sending packet: \$QTStart#/ {t0 = $1 + 0; next}
    t0 && /Packet received:/ {printf "%.2f", $1 - t0; exit}' "$dbg")
  local hwm rss
  hwm=$([ "$tps" != 0 ] && awk '/^VmHWM:/ {print $2}' "$work/stub-status" 2>/dev/null)
  rss=$([ "$tps" != 0 ] && awk '/^VmRSS:/ {print $2}' "$work/stub-status" 2>/dev/null)
  rm -f "$work/stub-status"
  echo "MANYROW round=$round tps=$tps span=$span calls=$((per * span)) ns_per_call=$(get ns_per_call)" \
    "tstart_s=$(get tstart_s) qtstart_s=${qt:--} tstop_s=$(get tstop_s) frames=${frames:--}" \
    "drops=$(get drops) on_module=$(get on_backend) vmhwm_kb=${hwm:--} vmrss_kb=${rss:--}"
  if [ -z "$(get ns_per_call)" ]; then
    fail+=" round $round tps $tps: no measurement;"
    tail -20 "$out"
  elif [ "$tps" != 0 ] && { [ "$(get on_backend)" != "$tps" ] || [ "${frames:-0}" != $((per * span)) ]; }; then
    fail+=" round $round tps $tps: want $tps on the module and $((per * span)) frames;"
    tail -20 "$out"
  fi
}

for r in $(seq 1 "$rounds"); do
  for t in $tps_list; do
    session "$r" 0 0 "$t"
    session "$r" "$t" "$([ "$r" = "$rounds" ] && echo 1 || echo 0)"
  done
done
if [ -z "$fail" ]; then
  echo "ok gdb_many"
else
  echo "FAIL gdb_many:$fail"
fi
