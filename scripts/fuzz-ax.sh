#!/bin/sh
# Fuzz the agent-expression VM (gdbserver-agent/src/shared/ax) with libFuzzer.
# Usage: scripts/fuzz-ax.sh [seconds=20] [build-dir=build-fuzz-ax]
# Builds tests/unit/ax/fuzz_ax.c with clang -fsanitize=fuzzer,address,undefined
# directly (no CMake configure of the whole tree needed), runs it on a copy of
# the seed corpus, and fails when libFuzzer reports a crash or a sanitizer error.
set -eu
secs=${1:-20}
root=$(cd "$(dirname "$0")/.." && pwd)
out=${2:-$root/build-fuzz-ax}
mkdir -p "$out/corpus"
src=$root/gdbserver-agent/src/shared
clang -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I"$src" -o "$out/fuzz_ax" "$root/tests/unit/ax/fuzz_ax.c" \
  "$src"/ax/ax_eval.c "$src"/ax/ax_format.c "$src"/ax/ax_opcodes.c \
  "$src"/ax/ax_strerror.c "$src"/ax/ax_verify.c
cp "$root"/tests/unit/ax/fuzz_corpus/* "$out/corpus/"
cd "$out"
"$out/fuzz_ax" -max_total_time="$secs" -print_final_stats=1 \
  -artifact_prefix="$out/" "$out/corpus"
