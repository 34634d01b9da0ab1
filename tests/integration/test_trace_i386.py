"""Tracepoints in an i386 (gcc -m32) program: frames whose 'R' block has the i386 layout of the
target description, so tfind/tdump show the right registers, arguments (a long long split over
two stack words), locals and globals; `tsave` and `target tfile` of such a trace. The kernel
collectors (eBPF, module) know only the x86-64 register file and instruction set: they refuse the
tracepoint, the engine says so on gdb's console and collects with ptrace.

Runs against stock gdbserver too (`GDBTRACE_SERVER=/usr/bin/gdbserver`): everything but the
collector messages, which only gdbtrace-server prints."""

import os
import re
import subprocess
import tempfile
import unittest

from gdbtest import GdbTestCase, available_collectors, gdb_base_command, program, run_gdb

PROGRAM = "m32_demo"
WIDE = 0x123456789abc  # the program's `wide`


def traced(after):
    # From main on: gdb re-sends the tracepoints when libc loads during a run, and stock gdbserver
    # refuses that (E01); gdbtrace-server accepts the identical definition.
    return ["break main", "continue", "break loop_done", "trace traced_point", "actions",
            "collect $regs, $args, $locals, counter, greeting", "end", "tstart", "continue",
            "tstop", "tstatus"] + after


class I386Tracepoints(GdbTestCase):
    def test_frames_in_i386_layout(self):
        run = run_gdb(traced(["tfind 2", "p i", "p w", "p counter", "p/x greeting", "info registers eip",
                              "p $esp == $sp", "p/x $cs", "p $orig_eax", "tdump", "tfind 4", "p i",
                              "p w", "tfind none"]),
                      program=PROGRAM, args=("loop",))
        self.assertOrdered(run, [r"Breakpoint 2, loop_done \(total=",
                                 r"Collected 5 trace frames",
                                 r"Found trace frame 2, tracepoint 3",
                                 r"^\$1 = 2$", rf"^\$2 = {WIDE + 2}$", r"^\$3 = 86$",
                                 r"^\$4 = 0x[0-9a-f]{8}$",
                                 r"^eip\s+0x[0-9a-f]{8}\s+0x[0-9a-f]{8} <traced_point\+\d+>",
                                 r"^\$5 = 1$", r"^\$6 = 0x23$", r"^\$7 = -1$",
                                 r"Data collected at tracepoint 3, trace frame 2:",
                                 r"^eip\s+0x[0-9a-f]{8}\s+0x[0-9a-f]{8} <traced_point\+\d+>",
                                 r"^i = 2$", rf"^w = {WIDE + 2}$", r"^counter = 86$",
                                 r"Found trace frame 4, tracepoint 3", r"^\$8 = 4$",
                                 rf"^\$9 = {WIDE + 4}$"])
        # Each kernel collector this server has passes an i386 process on, saying why; ptrace collects.
        for kernel in ("module", "ebpf"):
            if kernel in available_collectors():
                self.assertOutput(run, rf"tracepoint 3: .*{kernel}: cannot collect from an i386 "
                                       r"\(32-bit\) process.*; using ptrace")

    def test_condition_over_i386_registers(self):
        """gdb compiles `i == 3` into bytecode reading ebp (i386 register 5) and memory."""
        run = run_gdb(["break main", "continue", "break loop_done", "trace traced_point if i == 3",
                       "actions", "collect $esp, w", "end", "tstart", "continue", "tstop", "tstatus",
                       "tfind 0", "p w", "p/x $esp"],
                      program=PROGRAM, args=("loop",))
        self.assertOrdered(run, [r"Collected 1 trace frames", r"Found trace frame 0, tracepoint 3",
                                 rf"^\$1 = {WIDE + 3}$", r"^\$2 = 0xff[0-9a-f]{6}$"])

    def test_tsave_and_tfile(self):
        """gdb's tsave of the i386 frames, read back by a fresh gdb with `target tfile`."""
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "i386.tf")
            saved = run_gdb(traced([f"tsave {path}", "info address traced_point"]), program=PROGRAM,
                            args=("loop",))
            self.assertRan(saved)
            self.assertTrue(os.path.exists(path) and os.path.getsize(path) > 0, saved.transcript())
            # The program is PIE and a tfile has no auxv: load its symbols where the process had them.
            m = re.search(r"Symbol \"traced_point\" is a function at address (0x[0-9a-f]+)", saved.stdout)
            self.assertIsNotNone(m, saved.transcript())
            static = subprocess.run(["nm", program(PROGRAM)], capture_output=True, text=True).stdout
            n = re.search(r"^([0-9a-f]+) T traced_point$", static, re.M)
            offset = int(m.group(1), 16) - int(n.group(1), 16)
            cmd = ["-batch", "-ex", f"add-symbol-file {program(PROGRAM)} -o {offset:#x}",
                   "-ex", f"target tfile {path}", "-ex", "tfind 3", "-ex", "p i", "-ex", "p w",
                   "-ex", "info registers eip", "-ex", "p counter", "-ex", "show architecture",
                   "-ex", "p $orig_eax"]
            out = subprocess.run(gdb_base_command() + cmd, capture_output=True, text=True, timeout=60)
            text = out.stdout + out.stderr
            for pattern in (r"Found trace frame 3, tracepoint 1", r"\$1 = 3", rf"\$2 = {WIDE + 3}",
                            r"eip\s+0x[0-9a-f]{8}\s+0x[0-9a-f]{8} <traced_point\+\d+>",
                            r"\$3 = 86", r'currently "i386"', r"\$4 = -1"):
                self.assertRegex(text, pattern, text)


if __name__ == "__main__":
    unittest.main()
