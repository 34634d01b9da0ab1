#!/bin/bash
# Threads: 1, 2 and 4 threads hitting the same tracepoint (tests/programs/bench_threads.c) under the
# raw uprobe floor, gdbtrace eBPF and ptrace collectors, stock gdbserver trap and fast tracepoints:
# throughput (hits/s), drops, and torn frames counted by walking the tsave'd buffer. See _threads.py.
set -uo pipefail
exec python3 "$(dirname "$0")/_threads.py" "$@"
