#!/bin/bash
# Trace-buffer capacity: how many `collect $rdi` frames the default 5 MB buffer holds (the run stops
# tfull) with the eBPF collector, against what the same buffer held when every frame was stored as
# its full tfile frame (5 MB / the expanded frame size, measured in the same run). See _buffer.py.
set -uo pipefail
exec python3 "$(dirname "$0")/_buffer.py" "$@"
