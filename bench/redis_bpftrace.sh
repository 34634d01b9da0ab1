#!/bin/bash
# A real server nobody here wrote (Debian's redis-server under redis-benchmark), attached and traced
# on libc's read for 60 s (smoke: 3 s), eBPF, streamed: the frames in the file == an independent
# bpftrace count of the same function, process and window. See _redis_bpftrace.py.
set -uo pipefail
exec python3 "$(dirname "$0")/_redis_bpftrace.py" "$@"
