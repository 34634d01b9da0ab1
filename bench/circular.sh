#!/bin/bash
# Circular trace buffer for 10 minutes (smoke: 4 s): eBPF, gdb's default buffer, a busy counter
# tracee; the stub's RSS flat within +-5 % after the warm-up and `tsave` exact. See _circular.py.
set -uo pipefail
exec python3 "$(dirname "$0")/_circular.py" "$@"
