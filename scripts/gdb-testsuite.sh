#!/bin/bash
# Run GDB 13's own DejaGnu testsuite (gdb/testsuite from the gdb source tree) against a gdbserver-
# compatible stub, with the stock /usr/bin/gdb as the debugger and the native-extended-gdbserver board.
#
#   scripts/gdb-testsuite.sh [--server PATH] [--label NAME] [--trace] [--only "gdb.x/y.exp ..."] [-j N]
#
#   --server  stub to test (default: build/gdbserver-agent/src/server/gdbtrace-server)
#   --label   name of the result directory build/gdb-testsuite/<label> (default: basename of --server)
#   --trace   also run gdb.trace/*.exp
#   --only    run exactly these tests (paths relative to gdb/testsuite, globs allowed)
#   --no-pie  non-PIE executables (board native-extended-gdbserver/-fno-PIE/-no-pie)
#   -j N      parallel runtest jobs (default 2; the machine is shared, do not go wider)
#   --compare LABEL_A LABEL_B   no run: per-.exp PASS/FAIL table of two earlier runs, and the tests
#             that pass in A but not in B
#   --markdown LABEL_A LABEL_B  no run: the same per-.exp table as Markdown (docs/gdb-testsuite.md)
#
# Environment: GDB_SRC (the unpacked binutils-gdb tree; default: Debian's gdb-source package
# /usr/src/gdb.tar.xz unpacked once into build/gdb-src), GDB (default /usr/bin/gdb).
# Results: build/gdb-testsuite/<label>/gdb.sum, gdb.log, summary.txt ("# of expected passes" etc.).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
gdb_src=${GDB_SRC:-}
gdb_bin=${GDB:-/usr/bin/gdb}
server="$repo/build/gdbserver-agent/src/server/gdbtrace-server"
label=""
jobs=2
with_trace=0
only=""
board=native-extended-gdbserver

compare_runs() {
  python3 - "$repo/build/gdb-testsuite/$1/gdb.sum" "$repo/build/gdb-testsuite/$2/gdb.sum" "$1" "$2" "${3:-text}" <<'PY'
import collections, re, sys
def load(path):
    per_exp, results = collections.defaultdict(collections.Counter), {}
    for line in open(path, errors="replace"):
        m = re.match(r"^(PASS|FAIL|XFAIL|KFAIL|XPASS|KPASS|UNRESOLVED|UNSUPPORTED|UNTESTED): ((gdb\.[^/]+/[^:]+\.exp): ?.*)$", line.rstrip())
        if m:
            per_exp[m.group(3)][m.group(1)] += 1
            results[m.group(2)] = m.group(1)
    return per_exp, results
(a, ra), (b, rb) = load(sys.argv[1]), load(sys.argv[2])
if sys.argv[5] == "markdown":
    # pass / fail (FAIL + UNRESOLVED) per file, then the totals; files that differ are marked.
    print(f"| test file | {sys.argv[3]} pass / fail | {sys.argv[4]} pass / fail |")
    print("|---|---|---|")
    tot = [0, 0, 0, 0]
    for exp in sorted(set(a) | set(b)):
        pa, fa = a[exp]["PASS"], a[exp]["FAIL"] + a[exp]["UNRESOLVED"]
        pb, fb = b[exp]["PASS"], b[exp]["FAIL"] + b[exp]["UNRESOLVED"]
        tot = [tot[0] + pa, tot[1] + fa, tot[2] + pb, tot[3] + fb]
        mark = " **≠**" if (pa, fa) != (pb, fb) else ""
        print(f"| {exp}{mark} | {pa} / {fa} | {pb} / {fb} |")
    print(f"| **total** | **{tot[0]} / {tot[1]}** | **{tot[2]} / {tot[3]}** |")
    sys.exit(0)
print(f"{'test file':45} {sys.argv[3]+' pass/fail':>22} {sys.argv[4]+' pass/fail':>22}")
for exp in sorted(set(a) | set(b)):
    fa = a[exp]["FAIL"] + a[exp]["UNRESOLVED"]
    fb = b[exp]["FAIL"] + b[exp]["UNRESOLVED"]
    print(f"{exp:45} {a[exp]['PASS']:>16}/{fa:<5} {b[exp]['PASS']:>16}/{fb:<5}")
lost = [name for name, status in ra.items() if status == "PASS" and rb.get(name) != "PASS"]
print(f"\n{len(lost)} tests pass with {sys.argv[3]} but not with {sys.argv[4]}:")
for name in lost:
    print(f"  {rb.get(name, 'MISSING'):11} {name}")
PY
}

while [ $# -gt 0 ]; do
  case "$1" in
    --compare) compare_runs "$2" "$3"; exit 0 ;;
    --markdown) compare_runs "$2" "$3" markdown; exit 0 ;;
    --server) server=$2; shift 2 ;;
    --label) label=$2; shift 2 ;;
    --trace) with_trace=1; shift ;;
    --only) only=$2; shift 2 ;;
    --no-pie) board=native-extended-gdbserver/-fno-PIE/-no-pie; shift ;;
    -j) jobs=$2; shift 2 ;;
    -j*) jobs=${1#-j}; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "unknown option: $1" >&2; exit 2 ;;
  esac
done

# Default source tree: Debian's gdb-source package (the same 13.1 as /usr/bin/gdb), unpacked once.
if [ -z "$gdb_src" ]; then
  repo_root=$(cd "$(dirname "$0")/.." && pwd)
  gdb_src=$repo_root/build/gdb-src/gdb
  if [ ! -f "$gdb_src/gdb/testsuite/configure" ]; then
    [ -f /usr/src/gdb.tar.xz ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gdb-source >/dev/null
    mkdir -p "$repo_root/build/gdb-src"
    tar -C "$repo_root/build/gdb-src" -xf /usr/src/gdb.tar.xz
  fi
fi
testsuite_src="$gdb_src/gdb/testsuite"
if [ ! -f "$testsuite_src/configure" ]; then
  echo "gdb testsuite not found at $testsuite_src (set GDB_SRC to the binutils-gdb source tree)" >&2
  exit 2
fi
server=$(readlink -f "$server")
if [ ! -x "$server" ]; then
  echo "server binary not found or not executable: $server" >&2
  exit 2
fi
command -v runtest >/dev/null || { echo "runtest missing (apt-get install dejagnu)" >&2; exit 2; }
[ -n "$label" ] || label=$(basename "$server")

tests="gdb.server/*.exp gdb.base/break.exp gdb.base/step-test.exp gdb.base/display.exp \
gdb.base/watchpoint.exp gdb.base/signals.exp gdb.base/attach.exp gdb.base/foll-fork.exp"
[ "$with_trace" = 1 ] && tests="$tests gdb.trace/*.exp"
[ -n "$only" ] && tests=$only

work="$repo/build/gdb-testsuite/$label"
mkdir -p "$work"
# gdb.trace's ftrace tests copy the in-process agent from a gdbserver build tree beside the
# testsuite (../../gdbserver/libinproctrace.so); without it they stop UNRESOLVED after their first
# half. Debian's gdbserver package has the agent: point the expected path at it.
if [ -f /usr/lib/libinproctrace.so ] && [ ! -e "$repo/build/gdbserver/libinproctrace.so" ]; then
  mkdir -p "$repo/build/gdbserver"
  ln -s /usr/lib/libinproctrace.so "$repo/build/gdbserver/libinproctrace.so"
fi
cd "$work"
# The testsuite configures standalone (its own autoconf script); only redo it when missing.
if [ ! -f Makefile ]; then
  "$testsuite_src/configure" >configure.log 2>&1 || { tail -20 configure.log; exit 1; }
fi
# site.exp names the tool (gdb), srcdir and the boards dir; check-parallel does not make it itself.
make site.exp >/dev/null

echo "gdb testsuite: server=$server gdb=$gdb_bin jobs=$jobs board=$board"
echo "tests: $tests"
echo "results: $work"
start=$(date +%s)
# check-parallel runs one runtest per .exp (GDB_PARALLEL mode) and merges the .sum/.log files.
# HOME points at the work dir so no ~/.gdbinit can interfere.
HOME="$work" make -k -j"$jobs" check-parallel \
  TESTS="$tests" \
  RUNTESTFLAGS="--target_board=$board GDB=$gdb_bin GDBSERVER=$server" \
  >make.log 2>&1 || true
end=$(date +%s)

{
  echo "server: $server"
  echo "board: $board"
  echo "tests: $tests"
  echo "elapsed: $((end - start)) s"
  sed -n '/=== gdb Summary ===/,$ p' gdb.sum 2>/dev/null
} >summary.txt
cat summary.txt
# Per-file FAIL/ERROR lines, for triage.
grep -E '^(FAIL|ERROR|UNRESOLVED|KPASS):' gdb.sum >failures.txt 2>/dev/null || true
echo "$(wc -l <failures.txt) FAIL/ERROR/UNRESOLVED lines in $work/failures.txt"
