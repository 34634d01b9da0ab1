#!/bin/bash
# Runs every bench row script (bench/*.sh except run.sh and _*.sh), collects their rows and prints
# a table with ratios; writes <out>/results.json and <out>/results.md. See bench/README.md.
#
#   bench/run.sh [--smoke] [--allow-miss] [--only NAME.sh ...] [--out DIR]
#     --smoke  tiny iteration counts (CI): checks the scripts work, numbers are not meaningful
#     --allow-miss  a missed target (MISS) does not fail the run (exploratory runs, --smoke in CI);
#              a target nothing measured (NA) and a broken script still do
#     --out    result directory (default: build/bench)
#     --no-save  a full run (no --smoke, no --only) also writes bench/results/latest.{json,md}; not with this
# Exit status: 0; 1 when a script failed (exit other than 0 and 3) or printed no row, or a target
# measured nothing; 3 when a target was missed (a script's exit 3 or a MISS line of the report).
# Installs missing packages (scripts/setup.sh) and builds (scripts/build.sh) when the binaries are missing.
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
save=1
allow_miss=0
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) BENCH_SMOKE=1; shift ;;
    --only) only+=("$2"); shift 2 ;;
    --out) out=$2; shift 2 ;;
    --no-save) save=0; shift ;;
    --allow-miss) allow_miss=1; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
"$repo/scripts/setup.sh" || echo "run.sh: scripts/setup.sh failed; rows needing missing packages will say NA" >&2
if [ ! -x "$GDBTRACE_SERVER" ] || [ ! -x "$BENCH_PROGRAMS/bench_work" ]; then
  echo "run.sh: building into $BENCH_BUILD (scripts/build.sh)" >&2
  BUILD_DIR=$BENCH_BUILD "$repo/scripts/build.sh" >&2 || exit 1
fi

scripts=()
for s in "$here"/*.sh; do
  name=$(basename "$s")
  [ "$name" = run.sh ] && continue
  [[ "$name" == _* ]] && continue
  if [ ${#only[@]} -gt 0 ] && [[ " ${only[*]} " != *" $name "* ]]; then continue; fi
  scripts+=("$s")
done

failed=0
missed=0
broken=() # scripts that failed: their logs are printed again after the report
raw=$out/rows.txt
: >"$raw"
for s in "${scripts[@]}"; do
  name=$(basename "$s" .sh)
  echo "--- bench/$name.sh $([ "$BENCH_SMOKE" = 1 ] && echo '(smoke)')" >&2
  start=$SECONDS
  args=()
  if [ "$name" = kmodule ]; then
    # Boots QEMU guests (minutes): not in --smoke unless asked; its table becomes rows below.
    if [ "$BENCH_SMOKE" = 1 ] && [ "${BENCH_KMODULE:-0}" != 1 ]; then
      echo "    skipped in --smoke (boots QEMU guests; BENCH_KMODULE=1 to run it)" >&2
      continue
    fi
    # Debian 12's kernel and the newest (the one where eBPF programs write registers); two guests
    # keep the full run within 15 minutes.
    args=("${BENCH_KMODULE_SERIES:-6.1 newest}")
  fi
  timeout --kill-after=30 "${BENCH_TIMEOUT:-1800}" bash "$s" "${args[@]}" >"$out/$name.out" 2>"$out/$name.err"
  rc=$?
  if [ "$name" = kmodule ]; then
    python3 "$here/_kmodule_rows.py" <"$out/$name.out" >"$out/$name.rows" && cat "$out/$name.rows" >>"$out/$name.out"
  fi
  grep -E '^(ROW |\{)' "$out/$name.out" | sed "s|^|$name\t|" >>"$raw"
  rows=$(grep -cE '^(ROW |\{)' "$out/$name.out")
  echo "    exit $rc, $rows rows, $((SECONDS - start))s (output: $out/$name.out, $out/$name.err)" >&2
  if [ "$rc" = 3 ] && [ "$rows" != 0 ]; then
    missed=1  # the script's own targets: its judged rows say which
    echo "    a target was missed (exit 3)" >&2
  elif [ "$rc" != 0 ] || [ "$rows" = 0 ]; then
    failed=1
    broken+=("$name")
    tail -5 "$out/$name.err" | sed 's/^/    /' >&2
  fi
done

kernel=$(uname -r)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
header="Run $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname): $(nproc) vCPU ($cpu), kernel $kernel, load average at start $load_start, at end $(cut -d' ' -f1-3 /proc/loadavg); scripts took ${SECONDS}s"
python3 "$here/_report.py" "$raw" "$out" "$BENCH_SMOKE" "$header"
case $? in
  0) ;;
  3) missed=1 ;;
  4) failed=1; echo "run.sh: a target measured nothing (NA): see the targets above" >&2 ;;
  *) failed=1; echo "run.sh: the report failed" >&2 ;;
esac
if [ "$BENCH_SMOKE" = 0 ] && [ ${#only[@]} -eq 0 ] && [ "$save" = 1 ]; then
  mkdir -p "$here/results"
  cp "$out/results.json" "$here/results/latest.json"
  cp "$out/results.md" "$here/results/latest.md"
  echo "saved: bench/results/latest.json bench/results/latest.md" >&2
fi
for name in "${broken[@]}"; do
  # After the report, so that the end of the log (all a CI run may show) says what broke.
  echo "run.sh: bench/$name.sh failed; the end of its log ($out/$name.err):" >&2
  tail -60 "$out/$name.err" | cut -c1-400 | sed 's/^/    /' >&2
done
if [ "$failed" = 1 ]; then
  exit 1
elif [ "$missed" = 1 ] && [ "$allow_miss" = 0 ]; then
  echo "run.sh: a target was missed (MISS; --allow-miss to accept for an exploratory run)" >&2
  exit 3
elif [ "$missed" = 1 ]; then
  echo "run.sh: a target was missed (MISS), accepted (--allow-miss)" >&2
fi
exit 0
