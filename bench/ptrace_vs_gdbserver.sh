#!/bin/bash
# gdbtrace's ptrace collector beside stock gdbserver 13.1's regular (trap) tracepoint (and the eBPF
# collector for reference), BENCH_RUNS interleaved runs (default 3), same tracee (bench_loop: probe_me(i, 3*i) n times, ns/iter measured inside the tracee), same gdb
# script (/work/shared/ANCHORS.md method: 200 MB trace buffer so every hit is collected, break main,
# trace probe_me, collect, tstart, run to exit, tstatus).
#   ns/hit = (traced ns/iter - untraced ns/iter) * n / frames   (frames from tstatus)
# gdbtrace rows select their collector with `monitor gdbtrace backend NAME` and read back the one
# each tracepoint used from `monitor gdbtrace status`: a row whose collector is not the one in its
# label is NA (reason=backend_X_not_Y), never a mislabelled number.
# Prints ROW lines (bench/README.md, run=K) and a summary: the ptrace target (>= 2x cheaper per hit
# than gdbserver's) from the per-run ratios, min/median/max, PASS only when the median and the worst
# run both meet it (the machine's trap cost drifts several-fold between runs), also as judged rows
# (exit 3 on a MISS). bench/workloads.sh and bench/threads.sh have the other columns.
set -uo pipefail
. "$(dirname "$0")/_lib.sh"

prog=$BENCH_PROGRAMS/bench_loop
bench_require "$prog"
work=$(mktemp -d /tmp/gdbtrace-bench-ptrace.XXXXXX)
trap '[ -n "${BENCH_KEEP:-}" ] || rm -rf "$work"' EXIT

n=$(bench_n 20000 200)
runs=${BENCH_RUNS:-3}
untraced=$(bench_untraced "$prog" "$(bench_n 2000000 20000)")
bench_row untraced bench_loop "$untraced" unit=ns_per_iter

# row MECHANISM SERVER COLLECT BACKEND [server options...]: one traced run, one ROW line. BACKEND:
# the gdbtrace collector to select and assert ("-" for stock gdbserver).
row() {
  local mech=$1 server=$2 collect=$3 backend=$4
  shift 4
  if [ ! -x "$server" ]; then
    bench_row "$mech" "probe_me:$collect" NA reason=no_server_binary
    return
  fi
  # TCP, not stdio: the tracee's own output (its ns_per_iter line) goes to the server's log.
  local port=$((20000 + RANDOM % 20000))
  "$server" --once "$@" ":$port" "$prog" "$n" >"$work/server.log" 2>&1 &
  local pid=$!
  bench_wait_listening "$work/server.log"
  bench_tracepoint_script "target extended-remote :$port" "$prog" "trace probe_me" "$collect" \
    >"$work/session.gdb"
  if [ "$backend" != - ]; then
    sed -i "s/^trace probe_me\$/monitor gdbtrace backend $backend\n&/" "$work/session.gdb"
    echo "monitor gdbtrace status" >>"$work/session.gdb"
  fi
  local out traced frames
  out=$(bench_gdb_session "$work/session.gdb")
  wait "$pid" 2>/dev/null
  out+=$'\n'$(cat "$work/server.log")
  echo "$out" >"$work/$mech.log"
  if [ "$backend" != - ]; then
    local used
    used=$(grep -o 'tracepoint [0-9]* at [^:]*: backend [a-z]*' <<<"$out" | tail -1 | awk '{print $NF}')
    if [ "$used" != "$backend" ]; then
      bench_row "$mech" "probe_me:$collect" NA reason=backend_${used:-none}_not_$backend
      return
    fi
  fi
  traced=$(bench_ns_per_iter "$out")
  frames=$(bench_frames "$out")
  if [ -z "$traced" ] || [ -z "$frames" ] || [ "$frames" = 0 ]; then
    bench_row "$mech" "probe_me:$collect" NA reason=no_frames n="$n"
    grep -m3 -iE "error|cannot" <<<"$out" >&2
    return
  fi
  local per_hit
  per_hit=$(awk -v t="$traced" -v u="$untraced" -v n="$n" -v f="$frames" \
    'BEGIN { printf "%.1f", (t - u) * n / f }')
  bench_row "$mech" "probe_me:$collect" "$per_hit" run="$run" frames="$frames" n="$n" backend="$backend" \
    complete=$([ "$frames" = "$n" ] && echo yes || echo no) traced_ns_per_iter="$traced"
  printf '%-24s %-16s %12s ns/hit  (%s frames of %s hits)\n' "$mech" "collect $collect" "$per_hit" \
    "$frames" "$n" >>"$work/summary"
  echo "$run $per_hit" >>"$work/ns.$mech.$collect"
}

# target COLLECT: the ptrace collector >= 2x cheaper per hit than stock gdbserver's trap tracepoint,
# judged on the ratios of runs where both rows measured.
target() {
  local collect=$1
  join "$work/ns.gdbtrace-ptrace.$collect" "$work/ns.gdbserver-trace.$collect" 2>/dev/null |
    awk -v c="$collect" '
      { r[NR] = $2 > 0 ? $3 / $2 : 0 }
      END {
        if (NR == 0) { printf "MISS ptrace >= 2x cheaper than gdbserver-trace, collect %s: no run with both rows\n", c; exit }
        for (i = 1; i <= NR; i++) for (j = i + 1; j <= NR; j++) if (r[j] < r[i]) { t = r[i]; r[i] = r[j]; r[j] = t }
        med = NR % 2 ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2
        printf "%s ptrace >= 2x cheaper than gdbserver-trace, collect %s: ratio min %.2fx median %.2fx max %.2fx over %d runs\n",
          (med >= 2 && r[1] >= 2 ? "PASS" : "MISS"), c, r[1], med, r[NR], NR }' >>"$work/summary"
}

for run in $(seq "$runs"); do
  for collect in '$regs' 'i'; do
    row gdbtrace-ptrace "$GDBTRACE_SERVER" "$collect" ptrace
    row gdbtrace-ebpf "$GDBTRACE_SERVER" "$collect" ebpf
    row gdbserver-trace /usr/bin/gdbserver "$collect" -
  done
done
for collect in '$regs' 'i'; do target "$collect"; done
[ -f "$work/summary" ] && cat "$work/summary"
while read -r result text; do
  bench_judge "$result" "$text"
done < <(grep -E '^(PASS|MISS) ' "$work/summary")
bench_exit
