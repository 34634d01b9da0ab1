"""gdbtrace GDB plugin package (see gdb-plugin/gdbtrace.py and docs/plugin.md).

Modules without a gdb import (unit-tested outside gdb): frames, ax, regs, stats,
exporters, latency, tracepoints, transport. The rest run inside gdb.
"""
