"""Jump-pad sites whose instruction is a branch, driven by the real gdb 13: `ftrace` on a `call
rel32`, a `jne rel32`, a `jmp rel32` and a `call *ptr(%rip)` (tests/programs/jumppad_branches.c,
written in assembly so the forms are exact) is served by the jump pad, which runs the branch from
the pad: every hit is a frame, the program's results are unchanged (both ways of the jne, the
pointer read at each call), and a backtrace from the called function shows the program's own
frames (the pad pushes the site's return address, as the call would)."""

import os
import re
import tempfile
import unittest

from gdbtest import GdbTestCase, Server, run_gdb

PROG = "jumppad_branches"
SITES = ("jp_call_site", "jp_jcc_site", "jp_got_site", "jp_jmp_site")


def backends(run):
    return re.findall(r"^tracepoint \d+ at 0x[0-9a-f]+.*: backend (\w+)", run.output, re.M)


def expected_sum(n):
    return sum(4 * i + 1 + (100 if i % 2 == 0 else 0) for i in range(n))


class JumpPadBranches(GdbTestCase):
    def test_branch_sites_are_run_from_the_pad(self):
        n = 25
        cmds = ["break jp_done"]
        for site in SITES:
            cmds += [f"ftrace *{site}", "actions", "collect $rbx", "end"]
        cmds += ["tstart", "continue", "monitor gdbtrace status", "tstop", "tstatus",
                 "tfind tracepoint 3", "print $pc == (long)&jp_jcc_site", "print $rbx",
                 "tfind tracepoint 5", "print $pc == (long)&jp_jmp_site", "print $rbx"]
        run = run_gdb(cmds, program=PROG, args=(n,))
        self.assertEqual(backends(run), ["jumppad"] * 4, run.transcript())
        self.assertOutput(run, rf"backend jumppad, hits {n}, frames {n}, drops 0")
        self.assertOrdered(run, [rf"Collected {4 * n} trace frames", r"\$1 = 1", r"\$2 = 0",
                                 r"\$3 = 1", r"\$4 = 0"])
        self.assertIn(f"BRANCHES n={n} sum={expected_sum(n)}", run.server_log)

    def test_backtrace_from_the_called_function(self):
        # The callee runs with the site's return address on the stack: gdb unwinds through it to
        # jp_branches and main, and `finish` returns to the instruction after the call.
        run = run_gdb(["ftrace *jp_call_site", "actions", "collect $rbx", "end", "tstart",
                       "break jp_leaf", "continue", "bt", "finish", "print $pc == (long)&jp_call_site + 5",
                       "delete", "break jp_done", "continue", "monitor gdbtrace status", "tstop"],
                      program=PROG, args=(4,))
        self.assertEqual(backends(run), ["jumppad"], run.transcript())
        self.assertOrdered(run, [r"#0 .*jp_leaf", r"#1 .*jp_branches", r"#2 .*main",
                                 r"Value returned is \$1 = 0", r"\$2 = 1"])
        self.assertIn(f"BRANCHES n=4 sum={expected_sum(4)}", run.server_log)

    def test_stepi_over_a_patched_site_takes_its_instruction(self):
        # gdb single-steps onto the patched call and over it: the step goes through the pad (which
        # records the hit) and stops where the call goes, never inside the pad ("?? ()"), as
        # gdbserver moves threads out of its jump pads (gdb's range-stepping.exp does this).
        run = run_gdb(["break *jp_branches", "ftrace *jp_call_site", "actions", "collect $rbx", "end",
                       "tstart", "continue", "stepi 4", "print $pc == (long)&jp_call_site", "stepi",
                       "print $pc == (long)&jp_leaf", "print *(long *)$sp == (long)&jp_call_site + 5",
                       "delete", "break jp_done", "continue", "tstop", "tstatus"],
                      program=PROG, args=(3,))
        self.assertEqual(backends(run) or ["jumppad"], ["jumppad"], run.transcript())
        self.assertOrdered(run, [r"\$1 = 1", r"\$2 = 1", r"\$3 = 1"])
        self.assertOutput(run, r"Collected 3 trace frames")
        self.assertIn(f"BRANCHES n=3 sum={expected_sum(3)}", run.server_log)

    def test_debug_file_names_each_collector_even_when_killed(self):
        # `--debug --debug-file=F` says which collector took each tracepoint (what gdb's testsuite
        # runs cannot ask `monitor gdbtrace status`), line by line: a stub killed mid-run (as
        # DejaGnu ends it) leaves the lines written so far.
        with tempfile.TemporaryDirectory() as d:
            log = os.path.join(d, "debug.log")
            with Server("multi", server_args=("--debug", f"--debug-file={log}")) as server:
                run_gdb(["break main", "run", "ftrace *jp_call_site", "trace jp_leaf", "tstart",
                         f"shell kill -9 {server.proc.pid}"],
                        program=PROG, args=(3,), server=server, mode="multi")
                server.proc.wait(timeout=10)
            with open(log) as f:
                text = f.read()
        # Tracepoints 2 and 3 (gdb's breakpoint at main is 1). "Listening on port" stays on stderr.
        self.assertRegex(text, r"\[gdbtrace\] tracepoint 2 at 0x[0-9a-f]+ \(ftrace\): jumppad\n")
        self.assertRegex(text, r"\[gdbtrace\] tracepoint 3 at 0x[0-9a-f]+: (ebpf|module|ptrace)")
        self.assertNotIn("Listening on port", text)


if __name__ == "__main__":
    unittest.main()
