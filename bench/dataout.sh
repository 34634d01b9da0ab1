#!/bin/bash
# Buffer and data path out, gdbtrace-server beside stock gdbserver: frames per second sustained until
# the buffer fills, the stub's peak RSS and bytes per frame, gdb walking every frame with tfind/tdump,
# and tsave of a 1 M-frame buffer. See bench/_dataout.py.
set -uo pipefail
exec python3 "$(dirname "$0")/_dataout.py" "$@"
