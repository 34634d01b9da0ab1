#!/bin/bash
# Installs what is missing, builds, and runs every test there is:
#   unit tests (ctest, everything not labelled integration)
#   integration tests (ctest -L integration: real /usr/bin/gdb against gdbtrace-server)
#   demo smoke (scripts/demo.sh --batch), and the demo built -m32 traced (demo-i386)
#   install (tests/install/run.sh: cmake --install, the .debs in a Debian 12 chroot, DKMS, lintian)
#   scripts/fuzz-ax.sh smoke            (if present)
#   scripts/fuzz.sh all 15              (every libFuzzer target of tests/fuzz, 15 s each)
#   scripts/sanitize.sh                 (unit + integration tests again, built with ASan + UBSan)
#   tests/qemu/run.sh all               (if present: kernel module in QEMU)
#   bench/run.sh --smoke --allow-miss   (if present)
# Prints a summary and exits non-zero if any step failed. Logs: build/test-logs/<step>.log
# Environment: BUILD_DIR (default ./build), JOBS (default 2), SKIP="qemu bench ..." to skip steps by name.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$repo/build}
jobs=${JOBS:-2}
logs=$build/test-logs
skip=" ${SKIP:-} "
mkdir -p "$logs"
# Every collector this machine can run is expected: a test whose collector (eBPF, module in QEMU) is
# missing fails instead of skipping (as under CI=true), so a green summary means it was tested.
export GDBTRACE_STRICT=1

names=()
results=()
times=()
failed=0

# step NAME TIMEOUT_SECONDS COMMAND...: runs one step with its output teed to its log.
step() {
  local name=$1 limit=$2
  shift 2
  if [[ "$skip" == *" $name "* ]]; then
    names+=("$name"); results+=("SKIPPED"); times+=("-")
    return 0
  fi
  echo
  echo "=== $name: $*"
  local start=$SECONDS rc
  timeout --kill-after=30 "$limit" "$@" 2>&1 | tee "$logs/$name.log"
  rc=${PIPESTATUS[0]}
  names+=("$name")
  times+=("$((SECONDS - start))s")
  if [ "$rc" = 0 ]; then
    local retried
    retried=$(grep -oE 'Test +#[0-9]+: [^ ]+ \.*\*\*\*(Failed|Timeout)' "$logs/$name.log" |
      sed -E 's/.*: ([^ ]+) .*/\1/' | sort -u | tr '\n' ' ')
    if [ -n "$retried" ]; then
      results+=("PASS (retried: ${retried% })")
    else
      results+=("PASS")
    fi
  else
    [ "$rc" = 124 ] && results+=("FAIL (timeout after ${limit}s)") || results+=("FAIL (exit $rc)")
    failed=1
  fi
  return 0
}

# What failed, in a few lines per failed step (test names, assertion and sanitizer lines), printed
# next to the summary so the tail of a CI log says which tests to look at.
failure_digest() {
  local i log
  for i in "${!names[@]}"; do
    [[ "${results[$i]}" == FAIL* ]] || continue
    log=$logs/${names[$i]}.log
    echo "--- ${names[$i]} failed; from $log:"
    grep -E '^(FAIL|ERROR): |\*\*\*(Failed|Timeout|Exception)|^[[:space:]]*[0-9]+ - |^[A-Za-z.]*Error: |SUMMARY: [A-Za-z]+Sanitizer|runtime error:|sanitizer report|^--- .*sanitizer-reports/|^==[0-9]+==|^FAIL |^RESULT .*FAIL|^run\.sh: bench/.* failed|^ *(BROKEN: |thread [0-9]+ \(|Traceback|[A-Za-z_.]+(Error|Exception|Expired): )' \
      "$log" 2>/dev/null | cut -c1-240 | head -40
  done
}

summary() {
  [ "$failed" = 0 ] || failure_digest
  echo
  echo "================ gdbtrace test summary ================"
  for i in "${!names[@]}"; do
    printf '  %-14s %-28s %s\n' "${names[$i]}" "${results[$i]}" "${times[$i]}"
  done
  echo "  logs: $logs"
  [ "$failed" = 0 ] && echo "ALL PASSED" || echo "SOME STEPS FAILED"
}

step build 1800 env BUILD_DIR="$build" JOBS="$jobs" "$repo/scripts/build.sh"
if [ "${results[-1]}" != PASS ]; then
  summary
  exit 1
fi

step unit 900 ctest --test-dir "$build" -LE integration -j"$jobs" --output-on-failure --timeout 300 \
  --repeat until-pass:2
# A test (unit suite or gdb-driven module) that fails runs once more (this is a shared, noisy
# machine); the summary names every one that needed it, with its first failure kept in the log.
step integration 1500 ctest --test-dir "$build" -L integration -j"$jobs" --output-on-failure \
  --repeat until-pass:2
step demo 300 env SKIP_BUILD=1 BUILD_DIR="$build" PORT="${DEMO_PORT:-23456}" "$repo/scripts/demo.sh" --batch
# The same program built as an i386 (gcc -m32) program, traced (test_demo_i386.py checks the values).
step demo-i386 300 env SKIP_BUILD=1 BUILD_DIR="$build" PORT="${DEMO_PORT:-23456}" DEMO=m32_quickstart_demo \
  "$repo/scripts/demo.sh" --trace
step install 1200 env BUILD_DIR="$build" JOBS="$jobs" "$repo/tests/install/run.sh"
[ -x "$repo/scripts/fuzz-ax.sh" ] && step fuzz-ax 600 "$repo/scripts/fuzz-ax.sh" 20 "$build/fuzz-ax"
step fuzz 900 env JOBS="$jobs" FUZZ_BUILD_DIR="$build-fuzz" "$repo/scripts/fuzz.sh" all 15
step sanitize 2400 env JOBS="$jobs" SANITIZE_BUILD_DIR="$build-sanitize" "$repo/scripts/sanitize.sh"
[ -x "$repo/tests/qemu/run.sh" ] && step qemu 1800 env GDBTRACE_BUILD="$build" "$repo/tests/qemu/run.sh" all
# Smoke counts are too small for a target's numbers to mean anything: a MISS is accepted there, a
# target nothing measured (NA: a collector that did not run) and a broken script are not.
[ -x "$repo/bench/run.sh" ] && step bench 900 env BUILD_DIR="$build" "$repo/bench/run.sh" --smoke --allow-miss

summary
exit $failed
