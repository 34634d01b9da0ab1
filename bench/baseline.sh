#!/bin/bash
# Baseline rows (what gdbtrace is compared against), measured as in /work/shared/ANCHORS.md:
#   untraced            bench_loop's own ns/iter (subtracted from every traced figure)
#   uprobe-tracefs      raw tracefs uprobe on probe_me, no fetch args: the kernel's floor
#   gdbserver-trace     stock gdbserver 13.1 regular (trap) tracepoint, collect $regs
#   gdbserver-ftrace    stock gdbserver + /usr/lib/libinproctrace.so fast tracepoint, non-PIE
#                       (collect sink, collect $regs); and the PIE case, which gdbserver refuses
# ns/hit = traced ns/iter - untraced ns/iter (one probe_me call per iteration); tstatus frame counts are
# checked so a full trace buffer cannot hide the cost.
set -uo pipefail
. "$(dirname "$0")/_lib.sh"

pie=$BENCH_PROGRAMS/bench_loop
nopie=$BENCH_PROGRAMS/bench_loop-nopie
bench_require "$pie" "$nopie"
work=$(mktemp -d /tmp/gdbtrace-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT

n_fast=$(bench_n 2000000 100000)
n_uprobe=$(bench_n 200000 20000)
n_trap=$(bench_n 20000 1000)

untraced_pie=$(bench_untraced "$pie" "$n_fast")
untraced_nopie=$(bench_untraced "$nopie" "$n_fast")
bench_row untraced bench_loop "$untraced_pie" unit=ns_per_iter n="$n_fast"
bench_row untraced bench_loop-nopie "$untraced_nopie" unit=ns_per_iter n="$n_fast"

# --- raw tracefs uprobe -------------------------------------------------------------------------
# uprobe_row WORKLOAD PROGRAM SYMBOL UNTRACED ARGS...: a tracefs uprobe (no fetch args) on SYMBOL.
uprobe_row() {
  local workload=$1 prog=$2 sym=$3 untraced=$4
  shift 4
  local tracefs off group=gdbtrace_bench event=${sym}_$$ out hits traced
  if ! tracefs=$(bench_tracefs); then
    bench_row uprobe-tracefs "$workload" NA reason=tracefs_unavailable
    return
  fi
  off=$(bench_file_offset "$prog" "$sym") || { bench_row uprobe-tracefs "$workload" NA reason=no_symbol; return; }
  if ! echo "p:$group/$event $prog:$off" >>"$tracefs/uprobe_events" 2>"$work/uprobe.err"; then
    bench_row uprobe-tracefs "$workload" NA reason="uprobe_events_rejected:$(tr ' ' _ <"$work/uprobe.err")"
    return
  fi
  echo 1 >"$tracefs/events/$group/$event/enable"
  out=$("$prog" "$@")
  hits=$(awk -v e="$event" '$2 == e { print $3 }' "$tracefs/uprobe_profile")
  echo 0 >"$tracefs/events/$group/$event/enable"
  echo "-:$group/$event" >>"$tracefs/uprobe_events"
  traced=$(bench_ns_per_iter "$out")
  bench_row uprobe-tracefs "$workload" "$(bench_sub "$traced" "$untraced")" hits="$hits" \
    traced_ns_per_iter="$traced"
}
# probe_me's first instruction (mov disp(%rip)) is single-stepped out of line; p_nop1's nop is emulated.
uprobe_row 'probe_me' "$pie" probe_me "$untraced_pie" "$n_uprobe"
sites=$BENCH_PROGRAMS/bench_sites
if [ -x "$sites" ]; then
  untraced_sites=$(bench_untraced "$sites" 1 "$n_fast")
  bench_row untraced bench_sites:p_nop1 "$untraced_sites" unit=ns_per_iter n="$n_fast"
  uprobe_row 'p_nop1' "$sites" p_nop1 "$untraced_sites" 1 "$n_uprobe"
fi

# --- stock gdbserver tracepoints ---------------------------------------------------------------
# gdbserver_row MECHANISM WORKLOAD PROGRAM UNTRACED TRACE_CMD COLLECT N [gdbserver options...]
gdbserver_row() {
  local mech=$1 workload=$2 prog=$3 untraced=$4 trace=$5 collect=$6 n=$7
  shift 7
  local target="target extended-remote | /usr/bin/gdbserver --once $* - $prog $n"
  bench_tracepoint_script "$target" "$prog" "$trace" "$collect" >"$work/session.gdb"
  local out traced frames
  out=$(bench_gdb_session "$work/session.gdb")
  echo "$out" >"$work/$mech-$workload.log"
  traced=$(bench_ns_per_iter "$out")
  frames=$(bench_frames "$out")
  if [ -z "$traced" ] || [ -z "$frames" ] || [ "$frames" = 0 ]; then
    local why
    # The first error gdb printed, e.g. "Target returns error code '.Jump back from jump pad too far...'".
    why=$(grep -v 'Error in sourced command file' <<<"$out" | grep -m1 -iE "error|refused|cannot|not supported" |
      sed -e "s/^Target returns error code '\.\?//" -e "s/'\.\?$//" | tr -s ' \t' '__' | tr -d '"' |
      cut -c1-100)
    bench_row "$mech" "$workload" NA reason="${why:-no_frames}" n="$n"
    return
  fi
  bench_row "$mech" "$workload" "$(bench_sub "$traced" "$untraced")" frames="$frames" n="$n" \
    complete=$([ "$frames" = "$n" ] && echo yes || echo no) traced_ns_per_iter="$traced"
}

ipa=(--wrapper env LD_PRELOAD=/usr/lib/libinproctrace.so --)
gdbserver_row gdbserver-trace 'probe_me:$regs' "$pie" "$untraced_pie" "trace probe_me" '$regs' "$n_trap"
gdbserver_row gdbserver-trace 'probe_me:sink' "$pie" "$untraced_pie" "trace probe_me" 'sink' "$n_trap"
if [ -f /usr/lib/libinproctrace.so ]; then
  gdbserver_row gdbserver-ftrace-nopie 'probe_me:sink' "$nopie" "$untraced_nopie" "ftrace probe_me" 'sink' \
    "$n_fast" "${ipa[@]}"
  gdbserver_row gdbserver-ftrace-nopie 'probe_me:$regs' "$nopie" "$untraced_nopie" "ftrace probe_me" '$regs' \
    "$n_trap" "${ipa[@]}"
  # Expected to be refused: the in-process agent's jump pad cannot reach a PIE text mapping.
  gdbserver_row gdbserver-ftrace-pie 'probe_me:sink' "$pie" "$untraced_pie" "ftrace probe_me" 'sink' \
    "$n_trap" "${ipa[@]}"
else
  bench_row gdbserver-ftrace-nopie 'probe_me:sink' NA reason=no_/usr/lib/libinproctrace.so
fi
