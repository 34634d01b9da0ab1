#!/bin/bash
# Plugin export of a large streamed trace file: `gdbtrace export csv|jsonl` in a fresh gdb on
# `target tfile FILE`, where FILE is a stream (`monitor gdbtrace stream`) many times larger than what
# the plugin may hold in memory (target: >= 1 M frames/s, gdb's peak RSS <= 256 MB whatever the size).
#
# The frames are real: plugin_demo's `bench` loop calls tiny_probe(i) N times under a tracepoint
# collecting g_sink and $trace_timestamp (38-byte frames), streamed to a file by the stub. Collecting
# 10 GB of them would take some 263 M hits, so the file exported is that stream's frame section
# repeated up to STREAM_EXPORT_GB (default 10; smoke 0.05) behind its own header, and its end marker
# (the header's frame count is the real stream's; the export counts the frames itself).
#
# Rows: ROW plugin-stream-export-<format> tiny_probe:<size>GB <ns per frame> unit=ns_per_frame
#       seconds=<wall> frames=<n> frames_per_s=<median rate> worst_frames_per_s=<slowest round>
#       peak_rss_mb=<median of gdb's max RSS> worst_peak_rss_mb=<largest> file_bytes=<size>
#       (STREAM_EXPORT_ROUNDS rounds, default 3), and judged rows per format for the rate and the
#       memory bound on the median and the worst round (exit 3 on a MISS).
set -uo pipefail
. "$(dirname "$0")/_lib.sh"

prog=$BENCH_PROGRAMS/plugin_demo
source_file=$BENCH_REPO/tests/programs/plugin_demo.c
plugin=$BENCH_REPO/gdb-plugin/gdbtrace.py
bench_require "$prog" "$GDBTRACE_SERVER" /usr/bin/time # gdb's peak RSS
n=$(bench_n 1000000 20000)
gb=${STREAM_EXPORT_GB:-$(bench_n 10 0.05)}
rss_limit_mb=256
work=$(mktemp -d "${BENCH_TMP:-/var/tmp}/gdbtrace-stream-export.XXXXXX")

line_of() { grep -n -F "$1" "$source_file" | head -1 | cut -d: -f1; }
port=$(bench_free_port)
"$GDBTRACE_SERVER" --once ":$port" "$prog" bench "$n" >"$work/server.log" 2>&1 &
server_pid=$!
trap 'kill $server_pid 2>/dev/null; rm -rf "$work"' EXIT
bench_wait_listening "$work/server.log"

cat >"$work/stream.gdb" <<GDB
file $prog
target extended-remote :$port
break plugin_demo.c:$(line_of '/* bp-bench-done */')
trace plugin_demo.c:$(line_of '/* tp-bench */')
actions
collect g_sink, \$trace_timestamp
end
monitor gdbtrace stream $work/run.tf
tstart
continue
tstop
kill
GDB
bench_gdb_session "$work/stream.gdb" | grep -v '^Reading ' | tail -5
wait $server_pid 2>/dev/null

# The stream's frame section repeated to GB gigabytes, behind the stream's own header.
python3 - "$work/run.tf" "$work/big.tf" "$gb" <<'PY' || exit 1
import os, sys
src, dst, gb = sys.argv[1], sys.argv[2], float(sys.argv[3])
data = open(src, "rb").read()
start, end = data.index(b"\n\n") + 2, len(data) - 4
if not data.endswith(b"\0\0\0\0") or end <= start:
    sys.exit("stream_export: %s is not an ended stream with frames" % src)
frames = data[start:end]
copies = max(1, int(gb * 1e9 / len(frames)))
with open(dst, "wb") as out:
    out.write(data[:start])
    for _ in range(copies):
        out.write(frames)
    out.write(data[end:])
print("STREAM copies=%d frame_bytes=%d file_bytes=%d" % (copies, len(frames), os.path.getsize(dst)))
PY
file_bytes=$(stat -c %s "$work/big.tf")

# One export in a fresh gdb: prints "<frames> <seconds> <peak RSS MB>", or nothing when it failed.
export_once() {
  local fmt=$1 out line
  out=$( /usr/bin/time -f "MAXRSS_KB %M" "$BENCH_GDB" -nx -batch -iex "set pagination off" \
    -iex "set debuginfod enabled off" -ex "source $plugin" -ex "file $prog" -ex "target tfile $work/big.tf" \
    -ex "gdbtrace export $fmt $work/out.$fmt" 2>&1)
  rm -f "$work/out.$fmt"
  line=$(grep -E "^Exported [0-9]+ frames to .* \\($fmt\\) in" <<<"$out" | tail -1)
  [ -n "$line" ] || { echo "$out" | tail -5 >&2; return; }
  echo "$(sed -E 's/^Exported ([0-9]+) frames.*/\1/' <<<"$line") $(sed -E 's/.* in ([0-9.]+) s \(cpu.*/\1/' <<<"$line")" \
    "$(awk '/^MAXRSS_KB/ { printf "%d", $2 / 1024 }' <<<"$out")"
}

# ROUNDS exports per format; the row is the median round, and both targets are judged on the median
# and on the worst round (slowest rate, largest RSS).
rounds=${STREAM_EXPORT_ROUNDS:-3}
for fmt in csv jsonl; do
  results=()
  for _ in $(seq "$rounds"); do
    r=$(export_once "$fmt")
    [ -n "$r" ] && results+=("$r")
  done
  if [ "${#results[@]}" != "$rounds" ]; then
    bench_row "plugin-stream-export-$fmt" "tiny_probe:${gb}GB" NA unit=ns_per_frame reason=export_failed \
      rounds_ok="${#results[@]}/$rounds"
    bench_judge MISS "plugin export $fmt of a ${gb} GB stream: no measurement (an export failed)"
    continue
  fi
  # frames seconds rss per round -> median and worst rate, median and worst RSS.
  read -r count secs rate worst_rate rss worst_rss rates <<<"$(printf '%s\n' "${results[@]}" | python3 -c '
import statistics, sys
rows = [line.split() for line in sys.stdin if line.strip()]
rates = sorted(int(int(f) / float(s)) if float(s) > 0 else 0 for f, s, _ in rows)
by_rate = sorted(rows, key=lambda r: int(r[0]) / float(r[1]) if float(r[1]) > 0 else 0)
mid = by_rate[len(by_rate) // 2]
rss = sorted(int(r[2]) for r in rows)
print(mid[0], mid[1], int(statistics.median(rates)), rates[0], int(statistics.median(rss)), rss[-1],
      ",".join(map(str, rates)))')"
  ns=$(awk -v r="$rate" 'BEGIN { printf "%.1f", (r > 0) ? 1e9 / r : 0 }')
  bench_row "plugin-stream-export-$fmt" "tiny_probe:${gb}GB" "$ns" unit=ns_per_frame seconds="$secs" \
    frames="$count" frames_per_s="$rate" worst_frames_per_s="$worst_rate" round_rates="$rates" \
    peak_rss_mb="$rss" worst_peak_rss_mb="$worst_rss" rounds="$rounds" file_bytes="$file_bytes" \
    load="$(cut -d' ' -f1 /proc/loadavg)"
  bench_judge "$([ "$worst_rate" -ge 1000000 ] && echo PASS || echo MISS)" \
    "plugin export $fmt of a ${gb} GB stream (tfile) >= 1 M frames/s, median and worst of $rounds: $rate and $worst_rate frames/s ($count frames)"
  bench_judge "$([ "$worst_rss" -le $rss_limit_mb ] && echo PASS || echo MISS)" \
    "plugin export $fmt of a ${gb} GB stream: gdb's peak RSS <= $rss_limit_mb MB, median and worst of $rounds: $rss and $worst_rss MB"
done
bench_exit
