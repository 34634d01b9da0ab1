#!/bin/bash
# Call-stack rows (`monitor gdbtrace stacks on`): what recording the registers and 8 KiB of stack
# at every hit costs each host collector, and how fast gdbtrace-server unwinds the frames (libdw).
#
# Tracee: tests/programs/bench_stacks (-O2, no frame pointers): main -> path_b -> common -> leaf
# N times; it times its own loop (ns_per_iter). A tracepoint at leaf, per collector (ebpf, ptrace):
#   stacks off: no actions (the hit and an empty frame);  stacks on: 'R' + 8192 bytes from $sp.
# Rows:
#   ROW stacks-<collector>-off leaf:<N>-hits <ns per hit over untraced> unit=ns_per_hit ...
#   ROW stacks-<collector>-on  leaf:<N>-hits <ns per hit over untraced> unit=ns_per_hit extra_ns=<on - off>
#   ROW stacks-unwind-<collector> leaf:<N>-frames <ns per frame> unit=ns_per_frame frames_per_s=<n>
#       (qGdbtrace.stacks over every frame through gdb: unwind + symbolize + fetch + parse, wall;
#        stub_frames_per_cpu_s: frames per CPU second of gdbtrace-server alone, which a loaded
#        machine does not blur; the first pass reads each module's CFI and symbols, the second
#        finds them cached)
set -uo pipefail
. "$(dirname "$0")/_lib.sh"

prog=$BENCH_PROGRAMS/bench_stacks
plugin=$BENCH_REPO/gdb-plugin/gdbtrace.py
bench_require "$prog" "$GDBTRACE_SERVER"
n=$(bench_n 20000 300)
work=$(mktemp -d /tmp/gdbtrace-stacks-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT

untraced=$(bench_untraced "$prog" 0 "$n" 1)
echo "untraced: $untraced ns per iteration" >&2

# session COLLECTOR STACKS: one traced run; prints gdb's output.
session() {
  local collector=$1 stacks=$2 port
  port=$(bench_free_port)
  "$GDBTRACE_SERVER" --once ":$port" "$prog" 0 "$n" 1 >"$work/server.log" 2>&1 &
  server_pid=$!
  bench_wait_listening "$work/server.log"
  cat >"$work/session.gdb" <<GDB
source $plugin
set trace-buffer-size 400000000
file $prog
target extended-remote :$port
monitor gdbtrace backend $collector
monitor gdbtrace stacks $stacks
break exit
trace leaf
tstart
continue
monitor gdbtrace status
tstop
python
import time
import os
from gdbtrace_plugin import session, stacks
stub = session.current_stub()
def stub_cpu():  # utime + stime of gdbtrace-server, seconds
    fields = open("/proc/$server_pid/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
for p in (1, 2):
    t, cpu = time.monotonic(), stub_cpu()
    c = sum(1 for _ in stacks.parse_lines(stub.iter_stacks()))
    dt, dcpu = time.monotonic() - t, stub_cpu() - cpu
    print("UNWOUND pass=%d frames=%d seconds=%.3f stub_cpu_seconds=%.3f" % (p, c, dt, dcpu))
end
gdbtrace stacks -top 2
kill
GDB
  bench_gdb_session "$work/session.gdb"
  wait "$server_pid" 2>/dev/null
  # the tracee's own line is in the server's log (its stdout)
  cat "$work/server.log"
}

for collector in ebpf ptrace; do
  off_ns=""
  for stacks in off on; do
    out=$(session "$collector" "$stacks")
    echo "$out" | grep -v '^Reading ' | tail -25 >&2
    backend=$(grep -oE "tracepoint 1 at 0x[0-9a-f]+: backend [a-z]+" <<<"$out" | awk '{print $NF}' | tail -1)
    hits=$(grep -oE "backend [a-z]+, hits [0-9]+" <<<"$out" | awk '{print $NF}' | tail -1)
    traced=$(bench_ns_per_iter "$out")
    if [ "$backend" != "$collector" ] || [ -z "$traced" ]; then
      bench_row "stacks-$collector-$stacks" "leaf:$n-hits" NA unit=ns_per_hit reason=collector_unavailable
      continue
    fi
    ns=$(bench_sub "$traced" "$untraced")
    extra=""
    if [ "$stacks" = off ]; then off_ns=$ns; else [ -n "$off_ns" ] && extra="extra_ns=$(bench_sub "$ns" "$off_ns")"; fi
    bench_row "stacks-$collector-$stacks" "leaf:$n-hits" "$ns" unit=ns_per_hit hits="$hits" \
      traced_ns_per_iter="$traced" untraced_ns_per_iter="$untraced" stack_bytes=$([ "$stacks" = on ] && echo 8192 || echo 0) $extra
    if [ "$stacks" = on ]; then
      for pass in 1 2; do
        line=$(grep -E "^UNWOUND pass=$pass " <<<"$out" | tail -1)
        frames=$(sed -E 's/.*frames=([0-9]+).*/\1/' <<<"$line")
        secs=$(sed -E 's/.* seconds=([0-9.]+).*/\1/' <<<"$line")
        cpu=$(sed -E 's/.*stub_cpu_seconds=([0-9.]+).*/\1/' <<<"$line")
        complete=$(grep -cE "^\s+$n\s+[0-9.]+%\s+leaf <- common <- path_b <- main$" <<<"$out")
        if [ -z "$line" ] || [ "${frames:-0}" = 0 ]; then
          bench_row "stacks-unwind-$collector-pass$pass" "leaf:$n-frames" NA unit=ns_per_frame reason=no_frames
          continue
        fi
        bench_row "stacks-unwind-$collector-pass$pass" "leaf:$frames-frames" \
          "$(awk -v s="$secs" -v f="$frames" 'BEGIN { printf "%.1f", s * 1e9 / f }')" unit=ns_per_frame \
          frames_per_s="$(awk -v s="$secs" -v f="$frames" 'BEGIN { printf "%d", (s > 0) ? f / s : 0 }')" \
          seconds="$secs" stub_cpu_seconds="$cpu" \
          stub_frames_per_cpu_s="$(awk -v s="$cpu" -v f="$frames" 'BEGIN { printf "%d", (s > 0) ? f / s : 0 }')" \
          all_paths_main_path_b_common_leaf=$([ "$complete" = 1 ] && echo yes || echo no)
      done
    fi
  done
done
