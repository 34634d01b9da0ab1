"""Statically linked threaded programs: no dynamic loader, no shared libc, threads still listed,
stopped together and stepped alone under scheduler locking."""

import re
import unittest

from gdbtest import GdbTestCase, run_gdb

SUM = "counters[0]+counters[1]+counters[2]"


class StaticThreads(GdbTestCase):
    def test_static_threads_breakpoint_threads_schedlock(self):
        run = run_gdb(["break main_marker", "continue", "info threads", "thread apply all bt",
                       "set scheduler-locking on", f"set $before = {SUM}", "next", "next",
                       "continue", f"printf \"locked = %lu\\n\", {SUM} - $before",
                       "print counters_sum() >= 0",
                       "set scheduler-locking off", "delete", "continue"],
                      program="static_mt_sched", args=(3,))
        self.assertOrdered(run, [r"Breakpoint 1, main_marker \(round=0\)",
                                 r"^\*\s+1\s+Thread", r"^\s+4\s+Thread",
                                 r"Breakpoint 1, main_marker \(round=1\)", r"^locked = 0$",
                                 r"^\$1 = 1$", r"exited normally"])
        self.assertNoOutput(run, r"from target:/lib64/ld-linux")
        # Every worker is in spin(), or still returning from the start barrier inside it.
        self.assertEqual(len(re.findall(r"(?m)^#\d+\s+.*\bspin \(arg=", run.output)), 3,
                         run.transcript())
        self.assertServerLog(run, r"mt_sched done: 3 rounds")

    def test_static_threads_tls(self):
        """A static executable has no link map: gdb asks qGetTLSAddr with LM 0 and the stub reads
        module 1's block (td_thr_tlsbase), as gdbserver does (gdb.threads/staticthreads.exp)."""
        run = run_gdb(["break main_marker", "continue", "print tls_index", "thread 2",
                       "print tls_index", "thread 4", "print tls_index"],
                      program="static_mt_sched", args=(2,))
        self.assertOrdered(run, [r"^\$1 = 100$", r"^\$2 = [0-2]$", r"^\$3 = [0-2]$"])
        self.assertNoOutput(run, r"Cannot find thread-local|qGetTLSAddr")

    def test_static_threads_mi(self):
        run = run_gdb(["-break-insert main_marker", "-exec-continue", "-thread-info", "-break-delete",
                       "-exec-continue"],
                      program="static_mt_sched", args=(2,), mi=True)
        self.assertOutput(run, r'\^done,threads=\[(\{id="\d".*){4}')
        self.assertOutput(run, r'\*stopped,reason="exited-normally"')


if __name__ == "__main__":
    unittest.main()
