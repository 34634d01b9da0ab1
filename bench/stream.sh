#!/bin/bash
# Long streamed traces (issue 29): 1, 2 and 4 threads of bench_threads on one tracepoint, eBPF
# `collect $regs`, gdb's default trace buffer, `monitor gdbtrace stream FILE`, >= 60 s per round,
# interleaved with the raw uprobe floor: hits/s vs the floor, frames in the file vs hits, drops, the
# stub's CPU per frame and peak RSS. See _stream.py; the targets are bench/_targets.py's stream-*.
set -uo pipefail
exec python3 "$(dirname "$0")/_stream.py" "$@"
