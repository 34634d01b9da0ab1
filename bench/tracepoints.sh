#!/bin/bash
# Thousands of tracepoints (issue 30): per-hit cost of 1, 1 000 and 10 000 tracepoints on eBPF, 1 and
# 1 000 on ptrace, and a run split between them, on tests/programs/bench_many.c; tstart time and the
# stub's memory beyond the trace buffer. Exits 3 on a MISS in a full run. See _tracepoints.py.
set -uo pipefail
exec python3 "$(dirname "$0")/_tracepoints.py" "$@"
