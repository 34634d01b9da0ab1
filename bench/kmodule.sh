#!/bin/bash
# Per-hit cost of the gdbtrace.ko collector inside the QEMU (TCG) guest, next to
# the raw uprobe floor (tracefs event) and the ptrace collector, on the same
# loop (tests/qemu/guest/gt_bench.c) in the same guest, for
#   nop  site: first instruction nop (the kernel emulates it itself)
#   load site: mov disp(%rip),%rax (single-stepped by the kernel, unless
#              gdbtrace.ko emulates it and the kernel skips the step)
# ns/hit = traced ns/iter - untraced ns/iter (one run; compare ratios, not
# absolute numbers: TCG is slow and noisy).
#   bench/kmodule.sh [6.1|6.12|newest|all] [N]    (default all, N=20000)
# `many`: thousands of tracepoints instead (issue 30, the module half of bench/tracepoints.sh's
# table): 1, 1 000 and 10 000 tracepoints against none, KMOD_MANY_ROUNDS (default 3) rounds in one
# boot per kernel (tests/qemu/gdb_many_bench.sh), rows and judged targets by bench/_kmodule_many.py;
# about 10 minutes per kernel under TCG. Exits 3 on a missed target.
#   bench/kmodule.sh many [6.1|6.12|newest|...]   (default 6.1)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" = many ]; then
  mkdir -p "$here/results"
  out=$here/results/kmodule-many-$(date -u +%Y%m%dT%H%M%SZ).log
  GT_MANY=10000 GT_MANY_BENCH=${KMOD_MANY_ROUNDS:-3} QEMU_TIMEOUT=${QEMU_TIMEOUT:-3000} \
    GDBTRACE_BUILD=${GDBTRACE_BUILD:-${BENCH_BUILD:-$here/../build}} "$here/../tests/qemu/run.sh" "${2:-6.1}" >"$out" 2>&1
  rc=$?
  grep -E "^(MANYROW|RESULT|ok gdb_many|FAIL gdb_many)" "$out" >&2
  echo "full log: $out" >&2
  python3 "$here/_kmodule_many.py" <"$out"
  judged=$?
  # The harness failing is this script failing (1); a missed target is 3 (bench/README.md).
  [ $rc != 0 ] && exit 1
  exit $judged
fi
series=${1:-all}
n=${2:-20000}
mkdir -p "$here/results"
out=$here/results/kmodule-$(date -u +%Y%m%dT%H%M%SZ).txt
GT_BENCH=$n GT_BENCH_GDB_N=${GT_BENCH_GDB_N:-2000} QEMU_TIMEOUT=${QEMU_TIMEOUT:-900} \
  GDBTRACE_BUILD=${GDBTRACE_BUILD:-${BENCH_BUILD:-$here/../build}} "$here/../tests/qemu/run.sh" "$series" >"$out.log" 2>&1
rc=$?
awk '
  /^=== kernel/ { kernel = $3 }
  /^--- console tail/ { exit }
  /^BENCH/ {
    what = $2; site = ""; ns = ""; n = ""
    for (i = 3; i <= NF; i++) {
      split($i, kv, "=")
      if (kv[1] == "site") site = kv[2]
      if (kv[1] == "ns_per_iter") ns = kv[2]
      if (kv[1] == "n") n = kv[2]
    }
    key = kernel " " site
    if (what == "untraced") base[key] = ns
    rows[++nrows] = kernel "|" site "|" what "|" n "|" ns
  }
  END {
    printf "%-24s %-5s %-34s %8s %12s %12s\n", "kernel", "site", "mechanism", "hits", "ns/iter", "ns/hit"
    for (i = 1; i <= nrows; i++) {
      split(rows[i], r, "|")
      b = base[r[1] " " r[2]]
      hit = (r[3] == "untraced" || b == "") ? "-" : sprintf("%.0f", r[5] - b)
      printf "%-24s %-5s %-34s %8s %12s %12s\n", r[1], r[2], r[3], r[4], r[5], hit
    }
  }' "$out.log" | tee "$out"
grep -E "^(RESULT|gdb bench)" "$out.log"
echo "full log: $out.log"
# The QEMU harness failing is this script failing (1), never a missed target (3: bench/README.md).
exit $((rc == 0 ? 0 : 1))
