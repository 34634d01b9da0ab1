#!/bin/bash
# libFuzzer targets of the stub (tests/fuzz/fuzz_<name>.cc) and of the AX VM (scripts/fuzz-ax.sh).
#   scripts/fuzz.sh TARGET [SECONDS=20]     one target (e.g. rsp_codec)
#   scripts/fuzz.sh all [SECONDS=20]        every target, SECONDS each (the CI smoke)
#   scripts/fuzz.sh list
# Builds into build-fuzz/ (or $FUZZ_BUILD_DIR) with clang, ASan and UBSan; runs each target on a copy
# of its seed corpus (tests/fuzz/corpus/<name>/) and fails on any crash, sanitizer report or broken
# property. Crash inputs are kept as build-fuzz/crash-<target>-*. Extra libFuzzer flags: FUZZ_FLAGS.
# Long runs: FUZZ_WORKERS=N runs N processes on the one corpus (distinct seeds, -reload=0: with a large
# corpus libFuzzer's periodic re-read was 16 % of the time), logs fuzz_<target>.<i>.log, and prints the
# executions of all of them; libFuzzer's own -jobs cannot serve fuzz_server_packets (it chroots).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${FUZZ_BUILD_DIR:-$repo/build-fuzz}
what=${1:-list}
secs=${2:-20}
targets=$(cd "$repo/tests/fuzz" && ls fuzz_*.cc | sed 's/^fuzz_//; s/\.cc$//')
if [ "$what" = list ]; then
  echo "$targets"
  exit 0
fi
[ "$what" = all ] && selected=$targets || selected=$what

"$repo/scripts/setup.sh"
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -g -O1"
if [ ! -f "$build/build.ninja" ]; then
  mkdir -p "$build"
  CC=clang CXX=clang++ cmake -S "$repo" -B "$build" -G Ninja -DGDBTRACE_FUZZ=ON \
    -DGDBTRACE_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_C_FLAGS=$flags" \
    "-DCMAKE_CXX_FLAGS=$flags" >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
fi
# The server-packet target runs the real vFile handlers as root inside a chroot sandbox. Before it
# fuzzes, check that the sandbox holds: a file opened for writing through vFile:setfs of another
# process (the stub then prefixes /proc/PID/root) must not appear outside it.
sandbox_holds() {
  local canary inputs hexpath pid
  canary=$(mktemp -u /tmp/gdbtrace-fuzz-canary-XXXXXX)
  inputs=$build/sandbox-check
  mkdir -p "$inputs"
  hexpath=$(printf %s "$canary" | od -An -tx1 | tr -d ' \n')
  for pid in 0 1 $$; do
    printf 'vFile:setfs:%x\nvFile:open:%s,201,1a4\nvFile:pwrite:0,0,x\nvFile:close:0' "$pid" "$hexpath" \
      >"$inputs/setfs-$pid"
  done
  GDBTRACE_FUZZ_WORKDIR=$build "$build/tests/fuzz/fuzz_server_packets" "$inputs"/setfs-* >/dev/null 2>&1
  if [ -e "$canary" ]; then
    rm -f "$canary"
    echo "fuzz_server_packets: its sandbox let a vFile write reach $canary: not fuzzing"
    return 1
  fi
}

rc=0
for t in $selected; do
  ninja -C "$build" -j"${JOBS:-2}" "fuzz_$t" >/dev/null
  if [ "$t" = server_packets ] && ! sandbox_holds; then
    rc=1
    continue
  fi
  corpus=$build/corpus/$t
  mkdir -p "$corpus"
  [ -d "$repo/tests/fuzz/corpus/$t" ] && cp -n "$repo/tests/fuzz/corpus/$t"/* "$corpus"/ 2>/dev/null || true
  echo "=== fuzz_$t: ${secs}s"
  workers=${FUZZ_WORKERS:-1}
  if [ "$workers" -le 1 ]; then
    # shellcheck disable=SC2086
    if ! GDBTRACE_FUZZ_WORKDIR=$build "$build/tests/fuzz/fuzz_$t" -max_total_time="$secs" -print_final_stats=1 -artifact_prefix="$build/crash-$t-" \
        ${FUZZ_FLAGS:-} "$corpus" 2>"$build/fuzz_$t.log"; then
      tail -60 "$build/fuzz_$t.log"
      echo "fuzz_$t: FAILED (inputs: $build/crash-$t-*)"
      rc=1
    else
      grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$build/fuzz_$t.log" | tr '\n' ' '
      echo
    fi
    continue
  fi
  pids=()
  for i in $(seq 1 "$workers"); do
    # shellcheck disable=SC2086
    GDBTRACE_FUZZ_WORKDIR=$build "$build/tests/fuzz/fuzz_$t" -max_total_time="$secs" -print_final_stats=1 \
      -seed=$((RANDOM * 1000 + i)) -reload=0 -artifact_prefix="$build/crash-$t-w$i-" ${FUZZ_FLAGS:-} \
      "$corpus" 2>"$build/fuzz_$t.$i.log" &
    pids+=($!)
  done
  total=0
  for i in $(seq 1 "$workers"); do
    if ! wait "${pids[$((i - 1))]}"; then
      tail -60 "$build/fuzz_$t.$i.log"
      echo "fuzz_$t worker $i: FAILED (inputs: $build/crash-$t-w$i-*)"
      rc=1
    fi
    n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$build/fuzz_$t.$i.log")
    total=$((total + ${n:-0}))
  done
  echo "fuzz_$t: $total executions in $workers workers"
done
exit $rc
