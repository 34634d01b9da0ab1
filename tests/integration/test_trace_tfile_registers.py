"""A saved trace file tells the truth about registers a collector could not read.

A BPF uprobe program cannot read the task's x87/SSE/AVX state: live, gdb shows those registers as
<unavailable> in eBPF frames (the module saves them when the 'R' mask names them: its round trip,
through a plain `tsave`, is checked in QEMU by tests/qemu/gdb_session.sh). gdb's tfile format has no per-frame availability, only
the size of the 'R' block: `tsave -r` (the stub writes the file) then keeps only the registers
every frame holds and numbers the others after them in the file's target description, so after
`target tfile` they read as <unavailable> too, not as 0. Frames with every register (ptrace) keep
them all. (A file gdb writes itself, plain `tsave`, has gdb's own header: see docs/collectors.md.)

Tracee: tests/programs/trace_loop.c."""

import os
import re
import tempfile
import unittest

from gdbtest import GdbTestCase, available_collectors, program, require, run_gdb


def saved_and_read_back(backend, tmp):
    path = os.path.join(tmp, f"{backend}.tf")
    live = run_gdb(["monitor gdbtrace backend " + backend, "break done", "trace probe_me", "actions",
                    "collect $regs, i", "end", "tstart", "continue", "tstop", "tfind 1",
                    "print $xmm0", "print $rdi", "tfind none", f"tsave -r {path}",
                    "print/x (long) &probe_me"],
                   program="trace_loop", args=(3,))
    live_fn = int(re.findall(r"\$\d+ = (0x[0-9a-f]+)", live.output)[-1], 16)
    static = run_gdb(["print/x (long) &probe_me"], program="trace_loop", connect=False)
    offset = live_fn - int(re.search(r"\$1 = (0x[0-9a-f]+)", static.output).group(1), 16)
    back = run_gdb([f"add-symbol-file {program('trace_loop')} -o {offset:#x}", f"target tfile {path}",
                    "tfind 1", "print $rdi", "print i", "print $pc >= probe_me && $pc < probe_me + 32", "print $xmm0",
                    "print $st0", "print $ymm0", "print $mxcsr", "print $rsp != 0"],
                   connect=False)
    return live, back


class TfileRegisterAvailability(GdbTestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="gdbtrace-tfile-regs-")

    def tearDown(self):
        self.tmp.cleanup()

    def test_kernel_collector_frames_keep_fpu_unavailable(self):
        require(self, "ebpf" in available_collectors(), "the eBPF collector is not available here", key="no-ebpf")
        live, back = saved_and_read_back("ebpf", self.tmp.name)
        self.assertOutput(live, r"^\$1 = <unavailable>$")      # live: xmm0 not collected
        self.assertOutput(live, r"^\$2 = 1$")
        self.assertOrdered(back, [r"Found trace frame 1, tracepoint \d+",
                                  r"^\$1 = 1$", r"^\$2 = 1$", r"^\$3 = 1$",
                                  r"^\$4 = <unavailable>$", r"^\$5 = <unavailable>$",
                                  r"^\$6 = <unavailable>$", r"^\$7 = <unavailable>$",
                                  r"^\$8 = 1$"])

    def test_ptrace_frames_keep_every_register(self):
        require(self, "ptrace" in available_collectors(), "the ptrace collector is not available here")
        live, back = saved_and_read_back("ptrace", self.tmp.name)
        self.assertOutput(live, r"^\$1 = \{v8_bfloat16")
        self.assertOrdered(back, [r"Found trace frame 1, tracepoint \d+",
                                  r"^\$1 = 1$", r"^\$2 = 1$", r"^\$3 = 1$",
                                  r"^\$4 = \{v8_bfloat16", r"^\$5 = \S+$", r"^\$6 = \{v16_bfloat16",
                                  r"^\$7 = \[",
                                  r"^\$8 = 1$"])
        self.assertNotIn("<unavailable>", back.stdout, back.transcript())


if __name__ == "__main__":
    unittest.main()
