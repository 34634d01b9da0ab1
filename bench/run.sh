#!/bin/bash
# Runs every bench row script (bench/*.sh except run.sh and _*.sh), collects their rows and prints
# a table with ratios; writes <out>/results.json and <out>/results.md. See bench/README.md.
#
#   bench/run.sh [--smoke] [--only NAME.sh ...] [--out DIR]
#     --smoke  tiny iteration counts (CI): checks the scripts work, numbers are not meaningful
#     --out    result directory (default: build/bench)
# Environment passed to the row scripts: BENCH_SMOKE, BENCH_BUILD, BENCH_PROGRAMS, GDBTRACE_SERVER.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
export BENCH_BUILD=${BENCH_BUILD:-${BUILD_DIR:-$repo/build}}
export BENCH_PROGRAMS=${BENCH_PROGRAMS:-$BENCH_BUILD/tests/programs}
export GDBTRACE_SERVER=${GDBTRACE_SERVER:-$BENCH_BUILD/gdbserver-agent/src/server/gdbtrace-server}
export BENCH_SMOKE=0
out=$BENCH_BUILD/bench
only=()
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) BENCH_SMOKE=1; shift ;;
    --only) only+=("$2"); shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"

scripts=()
for s in "$here"/*.sh; do
  name=$(basename "$s")
  [ "$name" = run.sh ] && continue
  [[ "$name" == _* ]] && continue
  if [ ${#only[@]} -gt 0 ] && [[ " ${only[*]} " != *" $name "* ]]; then continue; fi
  scripts+=("$s")
done

failed=0
raw=$out/rows.txt
: >"$raw"
for s in "${scripts[@]}"; do
  name=$(basename "$s" .sh)
  echo "--- bench/$name.sh $([ "$BENCH_SMOKE" = 1 ] && echo '(smoke)')" >&2
  start=$SECONDS
  timeout --kill-after=30 "${BENCH_TIMEOUT:-1800}" bash "$s" >"$out/$name.out" 2>"$out/$name.err"
  rc=$?
  grep -E '^(ROW |\{)' "$out/$name.out" | sed "s|^|$name\t|" >>"$raw"
  rows=$(grep -cE '^(ROW |\{)' "$out/$name.out")
  echo "    exit $rc, $rows rows, $((SECONDS - start))s (output: $out/$name.out, $out/$name.err)" >&2
  if [ "$rc" != 0 ] || [ "$rows" = 0 ]; then
    failed=1
    tail -5 "$out/$name.err" | sed 's/^/    /' >&2
  fi
done

python3 - "$raw" "$out" "$BENCH_SMOKE" <<'PY'
import json, shlex, sys
raw, out, smoke = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
rows = []
for line in open(raw):
    script, _, text = line.rstrip("\n").partition("\t")
    if text.startswith("{"):
        row = json.loads(text)
    else:
        parts = shlex.split(text[4:]) if '"' in text else text[4:].split()
        row = {"mechanism": parts[0], "workload": parts[1], "ns_per_hit": parts[2]}
        for kv in parts[3:]:
            key, _, value = kv.partition("=")
            row[key] = value
    value = row.get("ns_per_hit")
    try:
        row["ns_per_hit"] = float(value)
    except (TypeError, ValueError):
        row["ns_per_hit"] = None
    row["script"] = script
    rows.append(row)

def per_hit(row):
    return row["ns_per_hit"] is not None and row.get("unit", "ns_per_hit") == "ns_per_hit"

def find(mech, workload):
    for r in rows:
        if r["mechanism"] == mech and r["workload"] == workload and per_hit(r):
            return r["ns_per_hit"]
    return None

# References: stock gdbserver's regular tracepoint on the same workload (else probe_me:$regs), and the
# raw tracefs uprobe on the same function (else probe_me).
for r in rows:
    if not per_hit(r):
        continue
    function = r["workload"].split(":")[0]
    slow = find("gdbserver-trace", r["workload"]) or find("gdbserver-trace", "probe_me:$regs")
    floor = find("uprobe-tracefs", function) or find("uprobe-tracefs", "probe_me")
    if slow and r["ns_per_hit"] > 0:
        r["speedup_vs_gdbserver_trace"] = round(slow / r["ns_per_hit"], 1)
    if floor:
        r["x_uprobe_floor"] = round(r["ns_per_hit"] / floor, 2)

json.dump({"smoke": smoke, "rows": rows}, open(f"{out}/results.json", "w"), indent=1)
header = "| mechanism | workload | ns/hit | vs gdbserver trap tracepoint | x uprobe floor | notes |"
lines = [header, "|---|---|---:|---:|---:|---|"]
for r in rows:
    value = "NA" if r["ns_per_hit"] is None else f"{r['ns_per_hit']:,.1f}"
    if r.get("unit") == "ns_per_iter":
        value += " ns/iter"
    notes = " ".join(f"{k}={v}" for k, v in r.items()
                     if k not in ("mechanism", "workload", "ns_per_hit", "script", "unit",
                                  "speedup_vs_gdbserver_trace", "x_uprobe_floor"))
    speed = r.get("speedup_vs_gdbserver_trace")
    lines.append(f"| {r['mechanism']} | {r['workload']} | {value} | "
                 f"{'' if speed is None else f'{speed:,.1f}x faster'} | {r.get('x_uprobe_floor', '')} | {notes} |")
table = "\n".join(lines) + "\n"
if smoke:
    table = "(smoke run: tiny iteration counts, numbers not meaningful)\n\n" + table
open(f"{out}/results.md", "w").write(table)
print(table)
print(f"results: {out}/results.json {out}/results.md")
PY
exit $failed
