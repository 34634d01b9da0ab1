#!/bin/bash
# Soak test (not in CI): gdbtrace-server attached to a real multithreaded server from Debian's packages,
# redis-server (io-threads), tracing its hottest function for a long time under a loopback load.
#   scripts/soak.sh [SECONDS=600] [RATE=2000 commands/s] [BACKEND=auto]
# Phases: (1) 15 s unpaced load, untraced: baseline commands/s; (2) attach, tracepoint on
# processCommand (one call per command) counting into a TSV and collecting it, 15 s unpaced load:
# traced commands/s; then SECONDS of load paced at RATE; (3) tstop, detach, 5 s load again.
# Checks: every redis answer correct in every phase; frames == tracepoint hits == an independent
# bpftrace uprobe count of processCommand over the same window; the stub's RSS sampled every 5 s stays
# flat (printed). Everything talks to 127.0.0.1 only and stops by itself.
# Environment: BUILD_DIR (default ./build), GDBTRACE_SERVER, REDIS_PORT (default 16379).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$repo/build}
seconds=${1:-600}
rate=${2:-2000}
backend=${3:-auto}
port=${REDIS_PORT:-16379}
server=${GDBTRACE_SERVER:-$build/gdbserver-agent/src/server/gdbtrace-server}
client=$repo/scripts/soak/redis_client.py
work=$(mktemp -d /tmp/gdbtrace-soak.XXXXXX)
[ -x "$server" ] || { echo "soak.sh: build first (scripts/build.sh): no $server" >&2; exit 1; }

for pkg in redis-server bpftrace gdb; do
  dpkg -s "$pkg" >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$pkg" >/dev/null
done

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --io-threads 2 \
  --io-threads-do-reads yes --daemonize no >"$work/redis.log" 2>&1 &
redis=$!
pids+=("$redis")
for _ in $(seq 50); do python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 1)" 2>/dev/null && break; sleep 0.1; done
echo "soak: redis-server pid $redis ($(redis-server --version | grep -o 'v=[0-9.]*')), $(grep -c . /proc/$redis/task/*/stat 2>/dev/null | wc -l) threads"

python3 "$client" "$port" 15 4 0 >"$work/baseline.json"
echo "soak: baseline (untraced, unpaced): $(cat "$work/baseline.json")"

gport=$(python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
"$server" --attach "127.0.0.1:$gport" "$redis" >"$work/server.log" 2>&1 &
stub=$!
pids+=("$stub")
for _ in $(seq 100); do grep -q "Listening on port" "$work/server.log" && break; sleep 0.1; done

# RSS of the stub every 5 s.
( while kill -0 "$stub" 2>/dev/null; do
    echo "$(date +%s) $(awk '/VmRSS/ {print $2}' /proc/$stub/status 2>/dev/null)"; sleep 5
  done ) >"$work/rss.txt" &
pids+=("$!")

# Independent count of the same uprobe over the same window (started before tstart, stopped after tstop;
# redis calls processCommand only for client commands, and no load runs outside the window).
bpftrace -e "uprobe:/usr/bin/redis-server:processCommand /pid == $redis/ { @hits = count(); }" \
  >"$work/bpftrace.txt" 2>&1 &
bpft=$!
pids+=("$bpft")
for _ in $(seq 100); do grep -q "Attaching" "$work/bpftrace.txt" && break; sleep 0.1; done
sleep 1

cat >"$work/session.gdb" <<GDB
set pagination off
set confirm off
set non-stop on
target extended-remote 127.0.0.1:$gport
monitor gdbtrace backend $backend
set trace-buffer-size 400000000
tvariable \$hits = 0
trace processCommand
actions
teval \$hits = \$hits + 1
collect \$hits
end
tstart
continue -a &
shell python3 $client $port 15 4 0 > $work/traced.json
shell python3 $client $port $seconds 4 $rate > $work/paced.json
shell sleep 1
tstop
monitor gdbtrace status
tstatus
interrupt -a
shell sleep 1
tfind end
print \$hits
tfind none
detach
GDB
echo "soak: tracing processCommand for 15 s unpaced + $seconds s at $rate commands/s ..."
timeout $((seconds + 300)) gdb -nx -q -batch -x "$work/session.gdb" /usr/bin/redis-server >"$work/gdb.txt" 2>&1 || true
kill -INT "$bpft" 2>/dev/null || true
wait "$bpft" 2>/dev/null || true
python3 "$client" "$port" 5 4 0 >"$work/after.json"

frames=$(grep -o 'Collected [0-9]* trace frames' "$work/gdb.txt" | awk '{print $2}')
hits=$(grep -o 'backend [a-z]*, hits [0-9]*' "$work/gdb.txt" | head -1 | awk '{print $4}')
tsv=$(grep -o '^\$[0-9]* = [0-9]*' "$work/gdb.txt" | tail -1 | awk '{print $3}')
used=$(grep -o 'backend [a-z]*, hits' "$work/gdb.txt" | head -1 | awk '{print $2}' | tr -d ,)
echo "soak: collector used: ${used:-none}"
uprobe=$(grep -o '@hits: [0-9]*' "$work/bpftrace.txt" | awk '{print $2}')
python3 - "$work" "${frames:-0}" "${hits:-0}" "${tsv:-0}" "${uprobe:-0}" "$seconds" "$rate" <<'PY'
import json, sys
work, frames, hits, tsv, uprobe = sys.argv[1], *map(int, sys.argv[2:6])
seconds, rate = sys.argv[6:8]
phase = {n: json.load(open(f"{work}/{n}.json")) for n in ("baseline", "traced", "paced", "after")}
rss = [int(l.split()[1]) for l in open(f"{work}/rss.txt") if len(l.split()) == 2]
wrong = sum(p["wrong"] for p in phase.values())
drop = 1 - phase["traced"]["commands_per_s"] / phase["baseline"]["commands_per_s"]
print(f"soak: commands/s untraced {phase['baseline']['commands_per_s']}, traced "
      f"{phase['traced']['commands_per_s']} (drop {drop:.1%}); paced run {phase['paced']['commands']} "
      f"commands in {phase['paced']['seconds']} s; after detach {phase['after']['commands_per_s']}")
print(f"soak: wrong answers {wrong}; frames {frames}, tracepoint hits {hits}, $hits {tsv}, "
      f"bpftrace uprobe count {uprobe}")
if rss:
    print(f"soak: stub RSS (KiB) first {rss[0]}, after 1 min {rss[min(12, len(rss) - 1)]}, "
          f"last {rss[-1]}, max {max(rss)} over {len(rss)} samples")
ok = wrong == 0 and frames > 0 and frames == hits == tsv == uprobe
print("soak: PASS" if ok else "soak: FAIL")
sys.exit(0 if ok else 1)
PY
rc=$?
[ $rc = 0 ] || { echo "--- gdb"; tail -30 "$work/gdb.txt"; echo "--- server"; tail -20 "$work/server.log"; }
exit $rc
