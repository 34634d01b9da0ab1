"""The jump pad collecting memory: `ftrace` + `collect jp_guarded.value` (a global: gdb sends an
absolute memory range) served by the pad, with the program's values in tfind and tdump; the
global's page made PROT_NONE by the program mid-run, so the pad's read faults: the stub, the
tracee's ptracer, sends the thread to the read's recovery code (docs/collectors.md "Jump pad":
memory), the program computes and prints what it does untraced, those frames show the value
`<unavailable>` and the status row counts the errors; and the stub SIGKILLed before the page goes
PROT_NONE in an attached program: the guard word the kernel clears at the stub's death keeps the
pads from reading, and the program finishes right. Real gdb against the real stub; gdbtrace-only
(stock gdbserver's agent needs LD_PRELOAD, and a bad read in it crashes the program)."""

import os
import re
import time
import unittest

from gdbtest import (GdbTestCase, Server, Tracee, descendants, is_stock_gdbserver, kill_new_processes,
                     program, run_gdb)

PROG = "jp_memory"
COLLECT = ["ftrace *jp_mem_site", "actions", "collect jp_guarded.value", "end"]


def backends(run):
    return re.findall(r"^tracepoint \d+ at 0x[0-9a-f]+.*: backend (\w+)", run.output, re.M)


def site_sum(n):
    return sum(2 * i + 1 for i in range(n))


@unittest.skipIf(is_stock_gdbserver(), "the jump pad is gdbtrace's collector; stock gdbserver's agent needs LD_PRELOAD")
class JumpPadMemory(GdbTestCase):
    def test_global_collected_by_the_pad(self):
        n = 20
        run = run_gdb(["break mem_done", *COLLECT, "tstart", "continue", "monitor gdbtrace status",
                       "tstop", "tstatus", "tfind 0", "print jp_guarded.value", "tfind 7",
                       "print jp_guarded.value", "tdump", "tfind none", "continue"],
                      program=PROG, args=(n,))
        self.assertEqual(backends(run), ["jumppad"], run.transcript())
        self.assertOutput(run, rf"backend jumppad, hits {n}, frames {n}, drops 0,")
        self.assertOrdered(run, [rf"Collected {n} trace frames", r"\$1 = 0", r"\$2 = 21",
                                 r"jp_guarded.value = 21", r"exited normally"])
        self.assertIn(f"jp_memory calls={n} sum={site_sum(n)}", run.server_log)

    def test_ranges_longer_than_one_ring_slot(self):
        # 112 bytes of memory ranges: the pad writes two-slot records (jumppad_layout.h).
        n = 20
        run = run_gdb(["break mem_done", "ftrace *jp_mem_site", "actions",
                       "collect jp_guarded.value, jp_wide", "end", "tstart", "continue",
                       "monitor gdbtrace status", "tstop", "tfind 7", "print jp_guarded.value",
                       "print jp_wide[12]", "tfind 19", "print jp_wide[12]",
                       "tfind none", "continue"],
                      program=PROG, args=(n,))
        self.assertEqual(backends(run), ["jumppad"], run.transcript())
        self.assertOutput(run, rf"backend jumppad, hits {n}, frames {n}, drops 0,")
        self.assertOrdered(run, [r"\$1 = 21", r"\$2 = 7", r"\$3 = 19", r"exited normally"])

    def test_global_unreadable_mid_run(self):
        # Calls 10..14 run with the page PROT_NONE: each hit's read faults in the pad, the stub
        # fixes the fault up (no signal reaches the program), the frame is kept without the range.
        n = 20
        run = run_gdb(["break mem_done", *COLLECT, "tstart", "continue", "monitor gdbtrace status",
                       "tstop", "tstatus", "tfind 9", "print jp_guarded.value", "tfind 12",
                       "print jp_guarded.value", "tfind 15", "print jp_guarded.value", "tfind none",
                       "continue"],
                      program=PROG, args=(n, "protect"))
        self.assertEqual(backends(run), ["jumppad"], run.transcript())
        self.assertOutput(run, rf"backend jumppad, hits {n}, frames {n}, drops 0,.*errors 5")
        self.assertOrdered(run, [rf"Collected {n} trace frames", r"\$1 = 27", r"\$2 = <unavailable>",
                                 r"\$3 = 45", r"exited normally"])
        self.assertNotRegex(run.output, r"SIGSEGV|Trace stopped by an error")
        self.assertIn(f"jp_memory calls={n} sum={site_sum(n)}", run.server_log)

    def test_stub_killed_then_the_global_unreadable(self):
        # Attached (a program the stub started dies with it), traced, the stub SIGKILLed; 5 s
        # after its start the program makes the page PROT_NONE and calls the site 1 000 times.
        # With no ptracer to fix a fault up, a pad that read would kill it with SIGSEGV.
        before = descendants()
        tracee = Tracee(program(PROG), args=(200, "late", 5000))
        try:
            time.sleep(0.3)
            with Server("attach", pid=tracee.pid) as server:
                run = run_gdb([*COLLECT, "tstart", "monitor gdbtrace status", "continue &",
                               "shell sleep 0.5", f"shell kill -9 {server.proc.pid}"],
                              program=PROG, server=server)
                self.assertEqual(backends(run), ["jumppad"], run.transcript())
                server.proc.wait(timeout=10)
            os.kill(tracee.pid, 18)  # SIGCONT, in case the tracer's death left it group-stopped
            out, _ = tracee.proc.communicate(timeout=60)
            self.assertEqual(tracee.proc.returncode, 0, out.decode() + run.transcript())
            self.assertIn(f"jp_memory calls=1200 sum={site_sum(200) + site_sum(1000)}", out.decode())
        finally:
            tracee.kill()
            kill_new_processes(before)


if __name__ == "__main__":
    unittest.main()
