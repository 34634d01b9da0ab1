# Helpers for bench row scripts (source it: . "$(dirname "$0")/_lib.sh"). See bench/README.md.
# Provides: BENCH_REPO BENCH_BUILD BENCH_PROGRAMS GDBTRACE_SERVER BENCH_SMOKE, and the functions below.

BENCH_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH_BUILD=${BENCH_BUILD:-${BUILD_DIR:-$BENCH_REPO/build}}
BENCH_PROGRAMS=${BENCH_PROGRAMS:-$BENCH_BUILD/tests/programs}
GDBTRACE_SERVER=${GDBTRACE_SERVER:-$BENCH_BUILD/gdbserver-agent/src/server/gdbtrace-server}
BENCH_SMOKE=${BENCH_SMOKE:-0}
BENCH_GDB=${BENCH_GDB:-/usr/bin/gdb}

# bench_n FULL SMOKE: the iteration count to use.
bench_n() { if [ "$BENCH_SMOKE" = 1 ]; then echo "$2"; else echo "$1"; fi; }

# bench_row MECHANISM WORKLOAD NS_PER_HIT [key=value ...]: the one line bench/run.sh collects.
# NS_PER_HIT is a number, or NA when the mechanism cannot run (say why in reason=...).
bench_row() { echo "ROW $*"; }

# bench_require FILE...: exits 1 (the script cannot run: broken) unless every FILE is executable.
bench_require() {
  local f
  for f in "$@"; do
    [ -x "$f" ] || { echo "missing $f (scripts/build.sh builds the server and tests/programs; scripts/setup.sh installs the packages)" >&2; exit 1; }
  done
}

# bench_judge PASS|MISS TEXT: a target the script judges itself, as a row with judged= (bench/_report.py
# lists those among its targets); a MISS makes bench_exit exit 3, the row scripts' convention (3 = a
# target missed, which bench/run.sh --allow-miss accepts; other non-zero = the script is broken).
BENCH_MISSED=0
bench_judge() {
  [ "$1" = PASS ] || BENCH_MISSED=1
  python3 -c 'import json, sys
print(json.dumps({"mechanism": "target", "workload": sys.argv[1], "ns_per_hit": None, "judged": sys.argv[2],
                  "text": sys.argv[3]}))' "$(basename "$0" .sh)" "$1" "$2"
}
bench_exit() { exit $((BENCH_MISSED ? 3 : 0)); }

# bench_free_port: a TCP port on 127.0.0.1 that nothing listens on now.
bench_free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# bench_wait_listening LOG: waits (up to 10 s) until the stub started with its output in LOG listens.
bench_wait_listening() {
  local _
  for _ in $(seq 200); do grep -q "Listening on port" "$1" && return 0; sleep 0.05; done
  return 1
}

# bench_ns_per_iter TEXT: the tracee's self-measured "ns_per_iter=<x>" from its output.
bench_ns_per_iter() { grep -o 'ns_per_iter=[0-9.]*' <<<"$1" | tail -1 | cut -d= -f2; }

# bench_frames TEXT: "Collected N trace frames" from gdb's tstatus output (empty if none).
bench_frames() { grep -o 'Collected [0-9]* trace frames' <<<"$1" | tail -1 | awk '{print $2}'; }

# bench_sub A B: A - B with one decimal.
bench_sub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", a - b }'; }

# bench_untraced PROGRAM ARGS...: median ns/iter of 3 untraced runs of a bench_loop-style program.
bench_untraced() {
  local prog=$1 runs=()
  shift
  for _ in 1 2 3; do runs+=("$(bench_ns_per_iter "$("$prog" "$@")")"); done
  printf '%s\n' "${runs[@]}" | sort -g | sed -n 2p
}

# bench_file_offset PROGRAM SYMBOL: file offset of SYMBOL (what a tracefs uprobe wants).
bench_file_offset() {
  python3 - "$1" "$2" <<'PY'
import re, subprocess, sys
prog, sym = sys.argv[1:]
addr = None
for line in subprocess.run(["nm", prog], capture_output=True, text=True).stdout.splitlines():
    parts = line.split()
    if len(parts) == 3 and parts[2] == sym:
        addr = int(parts[0], 16)
for line in subprocess.run(["readelf", "-lW", prog], capture_output=True, text=True).stdout.splitlines():
    m = re.match(r"\s*LOAD\s+(0x[0-9a-f]+)\s+(0x[0-9a-f]+)\s+\S+\s+(0x[0-9a-f]+)", line)
    if m and addr is not None:
        off, vaddr, size = (int(x, 16) for x in m.groups())
        if vaddr <= addr < vaddr + size:
            print(hex(addr - vaddr + off))
            sys.exit(0)
sys.exit(f"{sym} not found in {prog}")
PY
}

# bench_tracefs: prints the tracefs mount point, mounting it if needed (root).
bench_tracefs() {
  for dir in /sys/kernel/tracing /sys/kernel/debug/tracing; do
    [ -f "$dir/uprobe_events" ] && { echo "$dir"; return 0; }
  done
  mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null && [ -f /sys/kernel/tracing/uprobe_events ] &&
    { echo /sys/kernel/tracing; return 0; }
  return 1
}

# bench_gdb_session SCRIPT_FILE: runs gdb -batch with SCRIPT_FILE (which contains the `target ...`
# line) and prints gdb's stdout+stderr (in stdio mode the tracee's output is on stderr too).
bench_gdb_session() {
  timeout 900 "$BENCH_GDB" -nx -batch -iex "set pagination off" -iex "set confirm off" \
    -iex "set debuginfod enabled off" -x "$1" 2>&1
}

# bench_tracepoint_script TARGET_LINE PROGRAM TRACE_CMD COLLECT: the anchor method's gdb script
# (200 MB buffer, stop at main, tracepoint, tstart, run to exit, tstatus).
bench_tracepoint_script() {
  local target=$1 prog=$2 trace=$3 collect=$4
  cat <<GDB
set trace-buffer-size 200000000
file $prog
$target
break main
continue
break exit
$trace
actions
collect $collect
end
tstart
continue
tstatus
GDB
}
