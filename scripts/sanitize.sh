#!/bin/bash
# Builds the stub and its unit tests with AddressSanitizer + UndefinedBehaviorSanitizer
# (-DGDBTRACE_SANITIZE=ON, into build-sanitize/ or $SANITIZE_BUILD_DIR) and runs the unit and
# integration tests with it. Any sanitizer report fails the run, also one from a server process
# that a test did not notice dying: every report goes to a log file, and the logs must stay empty.
#   scripts/sanitize.sh [ctest -R regex]
# Environment: JOBS (default 2).
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${SANITIZE_BUILD_DIR:-$repo/build-sanitize}
reports=$build/sanitizer-reports
filter=${1:-}

BUILD_DIR=$build JOBS=${JOBS:-2} "$repo/scripts/build.sh" -DGDBTRACE_SANITIZE=ON || exit 1

rm -rf "$reports" "$reports.aside" && mkdir -p "$reports"
# log_path: reports land in files (the server's stderr is often a pipe nobody reads);
# abort_on_error: a report also fails the process that made it; log_exe_name: the
# file names the program (asan.trace_tests.PID).
export ASAN_OPTIONS="log_path=$reports/asan:log_exe_name=1:abort_on_error=1:detect_leaks=1:strict_string_checks=1"
export UBSAN_OPTIONS="log_path=$reports/ubsan:print_stacktrace=1:halt_on_error=1"
export GDBTRACE_SANITIZED=1 # tests that measure memory allow for ASan's own
export LSAN_OPTIONS="suppressions=$repo/scripts/lsan.supp:print_suppressions=0"

rc=0
args=(--test-dir "$build" -j"${JOBS:-2}" --output-on-failure)
[ -n "$filter" ] && args+=(-R "$filter")
# As in scripts/test.sh: a failing test runs once more (any sanitizer report still fails the step).
ctest "${args[@]}" -LE integration --timeout 600 --repeat until-pass:2 || rc=1
ctest "${args[@]}" -L integration --repeat until-pass:2 || rc=1

shopt -s nullglob
# LeakSanitizer's "Unable to get registers from thread N." alone is no finding:
# at exit its tracer could not read the registers of a thread that was exiting
# too, and it then scans that thread's whole stack (more conservative, not less).
# An empty log is none either: a server killed by a test's teardown while its
# exit-time leak check ran (the clean root's run had one, CI one with that line).
# A log holding only such lines, or none, is shown and set aside; any other line fails.
# With log_exe_name=1 the line reads "==gdbtrace-server==PID==Unable ...".
for f in "$reports"/*; do
  if ! grep -qv -E '^==([^=]+==)?[0-9]+==Unable to get registers from thread [0-9]+\.$' "$f"; then
    echo "sanitize.sh: set aside (empty, or only LeakSanitizer's lone note on an exiting thread): $f: $(head -c 200 "$f")"
    mkdir -p "$reports.aside" && mv "$f" "$reports.aside/"
  fi
done
logs=("$reports"/*)
if [ ${#logs[@]} -gt 0 ]; then
  echo "sanitize.sh: ${#logs[@]} sanitizer report(s):"
  for f in "${logs[@]}"; do
    echo "--- $f"
    head -60 "$f"
  done
  rc=1
fi
[ "$rc" = 0 ] && echo "sanitize.sh: unit and integration tests clean under ASan + UBSan"
exit $rc
