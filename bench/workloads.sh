#!/bin/bash
# Workload matrix: every mechanism (raw uprobe floor, stock gdbserver trap and fast tracepoints,
# gdbtrace ptrace and eBPF collectors) x every workload (collect $regs; two arguments; a 64-byte struct
# through a pointer; a condition false 99% of the time; a TSV counter only; a single-stepped site; a
# shared-library function), one traced run per mechanism on tests/programs/bench_work.c.
# Rows carry column=<workload> for bench/run.sh's matrix. See bench/_workloads.py.
set -uo pipefail
exec python3 "$(dirname "$0")/_workloads.py" "$@"
