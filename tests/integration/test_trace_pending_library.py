"""A tracepoint on a library function set before the library is loaded collects once per call.

gdb first resolves `trace counter_bump` to the executable's PLT stub (counter_bump@plt); when the
library loads during the run it re-sends tracepoint 1 with the function's own address and forgets
the stub, with no packet to remove the stub location from the target. Every call passes through
both, so without care a run of 5 000 calls makes 10 000 frames (stock gdbserver does). The stub
location is retired when the new location arrives: 5 000 frames, each in the library function.

Tracee: tests/programs/plt_calls_uses_libcounter.c (N calls of counter_bump(i) from libcounter.so)."""

import re
import unittest

from gdbtest import GdbTestCase, available_collectors, require, run_gdb

CALLS = 5000


def trace_pending(backend):
    return run_gdb(["monitor gdbtrace backend " + backend, "trace counter_bump", "actions",
                    "collect $rdi", "end", "info tracepoints", "break calls_done", "tstart",
                    "continue", "tstop", "info tracepoints", "tstatus", "monitor gdbtrace status",
                    "tfind start", "print (int) $rdi", "print $pc", "info symbol $pc", "tfind end",
                    "tfind 4999", "print (int) $rdi", "tfind 5000", "tfind none", "delete",
                    "continue"],
                   program="plt_calls_uses_libcounter", args=(CALLS,), timeout=240)


class PendingLibraryTracepoint(GdbTestCase):
    def check(self, backend):
        require(self, backend in available_collectors(), f"collector {backend} not available here")
        run = trace_pending(backend)
        # Set before the library loads: gdb's first location is the PLT stub.
        self.assertOutput(run, r"<counter_bump@plt>")
        self.assertOutput(run, r"moved from the PLT stub 0x[0-9a-f]+ to 0x[0-9a-f]+")
        self.assertOutput(run, rf"Collected {CALLS} trace frames\.")
        self.assertOutput(run, rf"hits {CALLS}, frames {CALLS}")
        # Every frame is in the library function (collected $rdi: the argument of its call; the
        # pc of a frame without registers is its tracepoint's location).
        self.assertOutput(run, r"^\$1 = 0$")
        self.assertOutput(run, r"counter_bump( \+ \d+)? in section \.text of .*libcounter\.so")
        self.assertOutput(run, rf"^\$3 = {CALLS - 1}$")
        self.assertOutput(run, r"Target failed to find requested trace frame|No trace frame found")
        self.assertServerLog(run, rf"plt_calls done: {CALLS} calls")

    def test_ebpf_collects_once_per_call(self):
        self.check("ebpf")

    def test_ptrace_collects_once_per_call(self):
        self.check("ptrace")


if __name__ == "__main__":
    unittest.main()
