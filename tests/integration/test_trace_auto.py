"""The tracepoint scenarios of test_trace_basic.py with the default backend selection (module,
eBPF, ptrace: eBPF on a host without gdbtrace.ko), so the whole gdb workflow is also proven through
an in-kernel collector, with per-tracepoint fallback to ptrace where eBPF cannot serve."""

import os
import unittest

os.environ["GDBTRACE_TEST_BACKEND"] = "auto"
from test_trace_basic import *  # noqa: E402,F401,F403  (same tests, other backend)

if __name__ == "__main__":
    unittest.main()
