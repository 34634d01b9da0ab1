"""Scheduler locking: with `set scheduler-locking on` gdb resumes one thread (vCont with a
per-thread action and no default action); every other thread must stay stopped through step,
next, continue and inferior calls. With it off (the default action continues them) they run."""

import re
import unittest

from gdbtest import GdbTestCase, run_gdb

SUM = "counters[0]+counters[1]+counters[2]"


class SchedulerLocking(GdbTestCase):
    def _delta(self, run, name):
        m = re.search(rf"^{name} = (\d+)$", run.output, re.MULTILINE)
        self.assertIsNotNone(m, f"{name} not printed\n{run.transcript()}")
        return int(m.group(1))

    def test_step_next_continue_leave_other_threads_stopped(self):
        run = run_gdb(["break main_marker", "continue", "set scheduler-locking on",
                       f"set $before = {SUM}",
                       "step", "next", "next", "continue",
                       f"printf \"locked = %lu\\n\", {SUM} - $before",
                       "info threads",
                       "set scheduler-locking off", f"set $before = {SUM}", "continue",
                       f"printf \"unlocked = %lu\\n\", {SUM} - $before",
                       "delete", "continue"],
                      program="mt_sched", args=(5,))
        self.assertOrdered(run, [r"Breakpoint 1, main_marker \(round=0\)",
                                 r"Breakpoint 1, main_marker \(round=1\)",
                                 r"^locked = ", r"Breakpoint 1, main_marker \(round=2\)",
                                 r"^unlocked = ", r"exited normally"])
        self.assertEqual(self._delta(run, "locked"), 0, "other threads ran under scheduler-locking on\n"
                         + run.transcript())
        self.assertGreater(self._delta(run, "unlocked"), 0, "other threads did not run with it off\n"
                           + run.transcript())
        self.assertServerLog(run, r"mt_sched done: 5 rounds")

    def test_step_mode_locks_stepping_only(self):
        """`set scheduler-locking step`: a `next` runs only the current thread."""
        run = run_gdb(["break main_marker", "continue", "set scheduler-locking step",
                       f"set $before = {SUM}", "next", "next",
                       f"printf \"stepped = %lu\\n\", {SUM} - $before",
                       "delete", "continue"],
                      program="mt_sched", args=(3,))
        self.assertEqual(self._delta(run, "stepped"), 0, run.transcript())
        self.assertOutput(run, r"exited normally")

    def test_successive_inferior_calls_with_threads(self):
        """Several inferior calls in a row, locked and unlocked: each returns its value and the
        program goes on afterwards."""
        run = run_gdb(["break main_marker", "continue",
                       "print counters_sum() >= 0", "print counters_sum() >= 0",
                       "call counters_sum()", "print counters_sum() >= 0",
                       "set scheduler-locking on", f"set $before = {SUM}",
                       "print counters_sum() == $before", "print counters_sum() == $before",
                       "print counters_sum() == $before",
                       "set scheduler-locking off", "print counters_sum() > 0",
                       "bt 1", "delete", "continue"],
                      program="mt_sched", args=(2,))
        self.assertOrdered(run, [r"^\$1 = 1", r"^\$2 = 1", r"^\$3 = \d+", r"^\$4 = 1", r"^\$5 = 1",
                                 r"^\$6 = 1", r"^\$7 = 1", r"^\$8 = 1", r"#0  main_marker \(round=0\)",
                                 r"exited normally"])
        self.assertNoOutput(run, r"The program being debugged (was signaled|stopped)")


class SchedulerLockingMi(GdbTestCase):
    def test_mi_exec_next_with_scheduler_locking(self):
        run = run_gdb(["-break-insert main_marker", "-exec-continue",
                       "-gdb-set scheduler-locking on",
                       f"-data-evaluate-expression \"$before = {SUM}\"",
                       "-exec-next", "-exec-next", "-exec-continue",
                       f"-data-evaluate-expression \"{SUM} - $before\"",
                       "-break-delete", "-gdb-set scheduler-locking off", "-exec-continue"],
                      program="mt_sched", args=(3,), mi=True)
        self.assertOutput(run, r'\*stopped,reason="breakpoint-hit".*func="main_marker",'
                               r'args=\[\{name="round",value="1"\}\]')
        self.assertOutput(run, r'\^done,value="0"')
        self.assertOutput(run, r'\*stopped,reason="exited-normally"')


if __name__ == "__main__":
    unittest.main()
