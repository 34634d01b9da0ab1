#!/bin/bash
# Plugin export rows: how long `gdbtrace export FORMAT FILE` takes for a 1 M-frame trace buffer
# (target: >= 1 M frames/s end to end, i.e. < 1 s per export; was < 3 s). gdb and a stub on one
# host move the frames through one file (qGdbtrace.frames.file), not 1 MiB packets. The buffer is produced for real: plugin_demo's `bench` loop calls
# tiny_probe(i) 1 M times; a tracepoint at its tp-bench line collects g_sink and $trace_timestamp
# (38-byte frames, no register block) through the collector the stub picks first (module, eBPF,
# then ptrace). Then gdb (plugin sourced) exports csv, jsonl, perfetto and tfile.
#
# Rows: ROW plugin-export-<format> tiny_probe:<frames>-frames <ns per frame> unit=ns_per_frame
#       seconds=<wall> cpu_seconds=<gdb's cpu> frames=<n> frames_per_s=<wall rate>
#       frames_per_cpu_s=<rate over gdb's cpu> backend=<collector> target=1s met=yes|no
#       and a judged row per format (exit 3 on a MISS, bench/README.md)
# Wall time on a shared 2-vCPU machine depends on the load; cpu_seconds is the plugin's own cost.
set -uo pipefail
. "$(dirname "$0")/_lib.sh"

prog=$BENCH_PROGRAMS/plugin_demo
source_file=$BENCH_REPO/tests/programs/plugin_demo.c
plugin=$BENCH_REPO/gdb-plugin/gdbtrace.py
bench_require "$prog" "$GDBTRACE_SERVER"
n=$(bench_n 1000000 20000)
work=$(mktemp -d /tmp/gdbtrace-plugin-bench.XXXXXX)

line_of() { grep -n -F "$1" "$source_file" | head -1 | cut -d: -f1; }
tp_line=$(line_of '/* tp-bench */')
done_line=$(line_of '/* bp-bench-done */')

# TCP, not `target remote | stub`: gdb reads a pipe much more slowly than a socket.
port=$(bench_free_port)
"$GDBTRACE_SERVER" --once ":$port" "$prog" bench "$n" >"$work/server.log" 2>&1 &
server_pid=$!
trap 'kill $server_pid 2>/dev/null; rm -rf "$work"' EXIT
bench_wait_listening "$work/server.log"

cat >"$work/session.gdb" <<GDB
source $plugin
set trace-buffer-size 200000000
file $prog
target extended-remote :$port
break plugin_demo.c:$done_line
trace plugin_demo.c:$tp_line
actions
collect g_sink, \$trace_timestamp
end
tstart
continue
gdbtrace status
tstop
tstatus
gdbtrace export csv $work/frames.csv
gdbtrace export jsonl $work/frames.jsonl
gdbtrace export perfetto $work/frames.json
gdbtrace export tfile $work/frames.tf
kill
GDB

out=$(bench_gdb_session "$work/session.gdb")
wait $server_pid 2>/dev/null
echo "$out" | grep -v '^Reading ' | tail -40
frames=$(bench_frames "$out")
backend=$(awk '$1 ~ /^[0-9]+$/ && $2 ~ /^0x/ { print $3; exit }' <<<"$out")
backend=${backend:-unknown}
complete=no
[ "${frames:-0}" = "$n" ] && complete=yes
csv_rows=$(($(wc -l <"$work/frames.csv" 2>/dev/null || echo 1) - 1))

for fmt in csv jsonl perfetto tfile; do
  line=$(grep -E "^Exported [0-9]+ frames to .* \\($fmt\\) in" <<<"$out" | tail -1)
  if [ -z "$line" ]; then
    bench_row "plugin-export-$fmt" "tiny_probe:${n}-frames" NA unit=ns_per_frame reason=export_failed \
      frames="${frames:-0}"
    bench_judge MISS "plugin export $fmt < 1 s end to end: no measurement (the export failed)"
    continue
  fi
  count=$(sed -E 's/^Exported ([0-9]+) frames.*/\1/' <<<"$line")
  secs=$(sed -E 's/.* in ([0-9.]+) s \(cpu.*/\1/' <<<"$line")
  cpu=$(sed -E 's/.*\(cpu ([0-9.]+) s\).*/\1/' <<<"$line")
  ns=$(awk -v s="$secs" -v c="$count" 'BEGIN { if (c > 0) printf "%.1f", s * 1e9 / c; else print "NA" }')
  met=$(awk -v s="$secs" 'BEGIN { print (s < 1.0) ? "yes" : "no" }')
  rate=$(awk -v s="$secs" -v c="$count" 'BEGIN { printf "%d", (s > 0) ? c / s : 0 }')
  cpu_rate=$(awk -v s="$cpu" -v c="$count" 'BEGIN { printf "%d", (s > 0) ? c / s : 0 }')
  bench_row "plugin-export-$fmt" "tiny_probe:${count}-frames" "$ns" unit=ns_per_frame seconds="$secs" \
    cpu_seconds="$cpu" frames="$count" frames_per_s="$rate" frames_per_cpu_s="$cpu_rate" backend="$backend" \
    complete="$complete" target=1s met="$met" csv_rows="$csv_rows" load="$(cut -d' ' -f1 /proc/loadavg)"
  bench_judge "$([ "$met" = yes ] && echo PASS || echo MISS)" \
    "plugin export $fmt of $count frames < 1 s end to end (>= 1 M frames/s): $secs s"
done
bench_exit
