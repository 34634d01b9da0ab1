"""The tracepoint scenarios of test_trace_basic.py with the default backend selection (module,
eBPF, ptrace: eBPF on a host without gdbtrace.ko), so the whole gdb workflow is also proven through
an in-kernel collector, with per-tracepoint fallback to ptrace where eBPF cannot serve."""

import os
import unittest

os.environ["GDBTRACE_TEST_BACKEND"] = "auto"
from test_trace_basic import *  # noqa: E402,F401,F403  (same tests, other backend)
from gdbtest import GdbTestCase, auto_backend, available_collectors, require, run_gdb  # noqa: E402


class AutoSelection(GdbTestCase):
    def test_auto_uses_an_in_kernel_collector(self):
        # Without this, every scenario above could pass through the ptrace fallback unnoticed.
        require(self, auto_backend() != "ptrace",
                f"no in-kernel collector here (collectors: {sorted(available_collectors())})")
        run = run_gdb(["monitor gdbtrace backend auto", "break done", "trace probe_me", "actions",
                       "collect i", "end", "tstart", "continue", "monitor gdbtrace status"],
                      program="trace_loop", args=(3,))
        self.assertRegex(run.output, rf"tracepoint \d+ at 0x[0-9a-f]+.*: backend {auto_backend()}\b",
                         run.transcript())

if __name__ == "__main__":
    unittest.main()
