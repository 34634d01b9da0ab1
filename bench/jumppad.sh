#!/bin/bash
# The jump pad (ftrace as a jump into an injected pad) side by side with one system call, stock
# gdbserver's in-process agent (non-PIE, LD_PRELOAD=libinproctrace.so), the raw uprobe floor on the
# same site, and the untraced program at 1/2/4 threads; judged per round on median and worst. See
# _jumppad.py. Uses uprobes: run under flock /tmp/gdbtrace-live.lock.
set -uo pipefail
exec python3 "$(dirname "$0")/_jumppad.py" "$@"
