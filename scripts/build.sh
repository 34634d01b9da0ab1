#!/bin/bash
# Installs missing packages (scripts/setup.sh), configures with CMake + Ninja and builds into ./build
# (or $BUILD_DIR). Extra arguments go to cmake's configure step, e.g. -DGDBTRACE_ENABLE_BPF=OFF.
# JOBS (default 2) limits the parallel build.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$repo/build}
"$repo/scripts/setup.sh"
mkdir -p "$build"
if [ ! -f "$build/build.ninja" ] || [ $# -gt 0 ]; then
  cmake -S "$repo" -B "$build" -G Ninja "$@" >"$build/configure.log" 2>&1 || {
    cat "$build/configure.log" >&2
    exit 1
  }
fi
ninja -C "$build" -j"${JOBS:-2}"
