#!/bin/bash
# eBPF collector rows: gdbtrace-server with `monitor gdbtrace backend ebpf`, driven by stock gdb as in
# /work/shared/ANCHORS.md, beside the raw uprobe floor (tracefs `p:grp/ev /path:0xOFF`, no fetch args)
# on the same instruction, in the same run:
#   p_nop1  (bench_sites 1): first instruction `nop`, emulated by the kernel at a uprobe
#   probe_me (bench_loop):   first instruction `mov disp(%rip),%rax`, single-stepped out of line
# ns/hit = traced ns/iter - untraced ns/iter (one hit per iteration); tstatus must count every hit.
set -uo pipefail
. "$(dirname "$0")/_lib.sh"

loop=$BENCH_PROGRAMS/bench_loop
sites=$BENCH_PROGRAMS/bench_sites
bench_require "$loop" "$sites"
work=$(mktemp -d /tmp/gdbtrace-bench-ebpf.XXXXXX)
trap 'rm -rf "$work"' EXIT

n=$(bench_n 200000 2000)
n_untraced=$(bench_n 2000000 20000)

untraced_loop=$(bench_untraced "$loop" "$n_untraced")
untraced_sites=$(bench_untraced "$sites" 1 "$n_untraced")
bench_row untraced bench_loop "$untraced_loop" unit=ns_per_iter n="$n_untraced"
bench_row untraced bench_sites:p_nop1 "$untraced_sites" unit=ns_per_iter n="$n_untraced"

# uprobe_floor WORKLOAD PROGRAM SYMBOL UNTRACED ARGS...: tracefs uprobe on SYMBOL's first instruction.
uprobe_floor() {
  local workload=$1 prog=$2 sym=$3 untraced=$4
  shift 4
  local tracefs off group=gdbtrace_bench event=ebpf_${sym}_$$ out traced
  tracefs=$(bench_tracefs) || { bench_row uprobe-tracefs "$workload" NA reason=tracefs_unavailable; return; }
  off=$(bench_file_offset "$prog" "$sym") || { bench_row uprobe-tracefs "$workload" NA reason=no_symbol; return; }
  if ! echo "p:$group/$event $prog:$off" >>"$tracefs/uprobe_events" 2>"$work/uprobe.err"; then
    bench_row uprobe-tracefs "$workload" NA reason=uprobe_events_rejected
    return
  fi
  echo 1 >"$tracefs/events/$group/$event/enable"
  out=$("$prog" "$@")
  echo 0 >"$tracefs/events/$group/$event/enable"
  echo "-:$group/$event" >>"$tracefs/uprobe_events"
  traced=$(bench_ns_per_iter "$out")
  bench_row uprobe-tracefs "$workload" "$(bench_sub "$traced" "$untraced")" traced_ns_per_iter="$traced"
}

# ebpf_row WORKLOAD PROGRAM SYMBOL COLLECT UNTRACED ARGS...: gdbtrace-server, backend ebpf.
ebpf_row() {
  local workload=$1 prog=$2 sym=$3 collect=$4 untraced=$5
  shift 5
  if [ ! -x "$GDBTRACE_SERVER" ]; then
    bench_row gdbtrace-ebpf "$workload" NA reason=no_gdbtrace-server
    return
  fi
  # TCP, not stdio: the tracee's output (its ns_per_iter line) lands in the server's log.
  local port=$((20000 + RANDOM % 20000))
  "$GDBTRACE_SERVER" --once ":$port" "$prog" "$@" >"$work/server.log" 2>&1 &
  local server=$!
  bench_wait_listening "$work/server.log"
  cat >"$work/ebpf.gdb" <<GDB
set trace-buffer-size 200000000
file $prog
target extended-remote :$port
break main
continue
break exit
monitor gdbtrace backend ebpf
trace $sym
actions
collect $collect
end
tstart
monitor gdbtrace status
continue
tstatus
kill
GDB
  local out traced frames
  out=$(bench_gdb_session "$work/ebpf.gdb")
  kill "$server" 2>/dev/null
  wait "$server" 2>/dev/null
  out+=$'\n'$(cat "$work/server.log")
  echo "$out" >"$work/ebpf-$sym.log"
  traced=$(bench_ns_per_iter "$out")
  frames=$(bench_frames "$out")
  if ! grep -q 'backend ebpf' <<<"$out"; then
    bench_row gdbtrace-ebpf "$workload" NA reason=ebpf_backend_not_used
    return
  fi
  if [ -z "$traced" ] || [ -z "$frames" ] || [ "$frames" = 0 ]; then
    local why
    why=$(grep -m1 -iE "error|refused|cannot|not supported" <<<"$out" | tr -s ' \t' '__' | tr -d '"' | cut -c1-100)
    bench_row gdbtrace-ebpf "$workload" NA reason="${why:-no_frames}"
    return
  fi
  bench_row gdbtrace-ebpf "$workload" "$(bench_sub "$traced" "$untraced")" frames="$frames" n="$n" \
    complete=$([ "$frames" = "$n" ] && echo yes || echo no) traced_ns_per_iter="$traced"
}

uprobe_floor p_nop1 "$sites" p_nop1 "$untraced_sites" 1 "$n"
ebpf_row 'p_nop1:sink' "$sites" p_nop1 sink "$untraced_sites" 1 "$n"
ebpf_row 'p_nop1:$regs' "$sites" p_nop1 '$regs' "$untraced_sites" 1 "$n"
uprobe_floor probe_me "$loop" probe_me "$untraced_loop" "$n"
ebpf_row 'probe_me:$regs' "$loop" probe_me '$regs' "$untraced_loop" "$n"

# --- without gdb or the stub: the collector probing bpf_bench's own `nop` site -------------------
# bpf_bench (tests/unit/bpf) installs the generated program on itself and times the calls, draining the
# ring every 4096 calls outside the timed part: the in-kernel cost per hit, beside the tracefs floor on
# the same instruction, interleaved so load changes hit both alike.
bench_tool=$BENCH_BUILD/tests/unit/bpf/bpf_bench
if [ -x "$bench_tool" ]; then
  untraced_tool=$(bench_ns_per_iter "$("$bench_tool" untraced "$n_untraced")")
  bench_row untraced bpf_bench:site "$untraced_tool" unit=ns_per_iter n="$n_untraced"
  floor_runs=() sink_runs=() regs_runs=()
  for _ in 1 2 3; do
    out=$(uprobe_floor site "$bench_tool" bpf_test_probe "$untraced_tool" untraced "$n")
    floor_runs+=("$(awk '{print $4}' <<<"$out")")
    sink_runs+=("$(bench_ns_per_iter "$("$bench_tool" sink "$n")")")
    regs_runs+=("$(bench_ns_per_iter "$("$bench_tool" regs "$n")")")
  done
  median() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
  bench_row uprobe-tracefs 'bpf_test_probe' "$(median "${floor_runs[@]}")" runs="$(IFS=,; echo "${floor_runs[*]}")"
  bench_row gdbtrace-ebpf-direct 'bpf_test_probe:sink' \
    "$(bench_sub "$(median "${sink_runs[@]}")" "$untraced_tool")" n="$n"
  bench_row gdbtrace-ebpf-direct 'bpf_test_probe:$regs' \
    "$(bench_sub "$(median "${regs_runs[@]}")" "$untraced_tool")" n="$n"
else
  bench_row gdbtrace-ebpf-direct 'bpf_test_probe:sink' NA reason=no_tests/unit/bpf/bpf_bench
fi
