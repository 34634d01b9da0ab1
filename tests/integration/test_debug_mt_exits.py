"""Threads that end the wrong way round: exec from a thread that is not the leader, the leader
exiting before the other threads (the process's exit status comes with the leader), and the thread
being stepped exiting while others remain."""

import time
import unittest

from gdbtest import GdbTestCase, mi_connected, run_gdb


class ExecFromNonLeader(GdbTestCase):
    def test_exec_in_worker_thread(self):
        run = run_gdb(["break before_exec", "continue", "info threads", "break after_exec",
                       "continue", "bt 1", "info threads", "continue"],
                      program="mt_exec")
        self.assertOrdered(run, [r"Breakpoint 1, before_exec", r"^\*\s+2\s+Thread",
                                 r"process \d+ is executing new program: .*mt_exec",
                                 r"Breakpoint 2, after_exec \(\)", r"#0  after_exec \(\)",
                                 r"exited with code 05"])
        # After the exec only one thread is left.
        listing = run.output[run.output.rfind("#0  after_exec"):]
        self.assertNotRegex(listing.split("exited")[0], r"(?m)^\s+2\s+Thread", run.transcript())

    def test_exec_in_worker_thread_with_scheduler_locking(self):
        """Only the exec'ing worker is resumed; its exec event arrives under the leader's tid."""
        run = run_gdb(["break before_exec", "continue", "set scheduler-locking on", "break after_exec",
                       "continue", "bt 1", "set scheduler-locking off", "continue"],
                      program="mt_exec", timeout=60)
        self.assertOrdered(run, [r"Breakpoint 1, before_exec",
                                 r"process \d+ is executing new program: .*mt_exec",
                                 r"Breakpoint 2, after_exec \(\)", r"exited with code 05"])

    def test_exec_in_worker_thread_mi(self):
        run = run_gdb(["-break-insert after_exec", "-exec-continue", "-thread-info", "-exec-continue"],
                      program="mt_exec", mi=True)
        self.assertOutput(run, r'\*stopped,reason="breakpoint-hit".*func="after_exec"')
        self.assertOutput(run, r'\*stopped,reason="exited",exit-code="05"')


class LeaderExitsFirst(GdbTestCase):
    def test_worker_ends_process_after_leader_exited(self):
        run = run_gdb(["break worker_marker", "continue", "info threads", "continue", "continue"],
                      program="mt_leader_exit")
        # The exited leader (a zombie until the group ends) is not listed, as with gdbserver.
        listing = run.output[run.output.find("  Id   Target Id"):]
        self.assertNotRegex(listing.split("\n\n")[0], r"(?m)^\*?\s+1\s+Thread", run.transcript())
        self.assertOrdered(run, [r"hit Breakpoint 1, worker_marker|Breakpoint 1, worker_marker",
                                 r"hit Breakpoint 1, worker_marker|Breakpoint 1, worker_marker",
                                 r"exited with code 07"])
        self.assertNoOutput(run, r"exited normally|exited with code 0[^7]")

    def test_locked_leader_exits(self):
        """scheduler-locking on and only the leader resumed: it calls pthread_exit and becomes a
        zombie the kernel does not report while the workers live. gdb must hear that no resumed
        thread is left, not wait forever (gdb.threads/no-unwaited-for-left.exp)."""
        run = run_gdb(["break main", "continue", "break pthread_exit", "continue",
                       "set scheduler-locking on", "continue", "info threads", "thread 2",
                       "set scheduler-locking off", "delete", "continue"],
                      program="mt_leader_exit", timeout=60)
        self.assertOrdered(run, [r"Breakpoint 2, .*pthread_exit", r"No unwaited-for children left",
                                 r"The current thread <Thread ID 1> has terminated",
                                 r"exited with code 07"])

    def test_interrupt_after_leader_exited_mi(self):
        """^C with the leader gone: the SIGINT stop is reported for a live thread."""
        with mi_connected("mt_leader_exit", mode="once", setup=["-gdb-set mi-async on"]) as mi:
            mi.send("-break-insert worker_marker")
            mark = len(mi.records)
            mi.send("-exec-continue")
            mi.wait_stopped(mark)
            mi.send("-break-delete")
            mark = len(mi.records)
            mi.send("-exec-continue")
            time.sleep(0.3)
            mi.send("-exec-interrupt")
            stop = mi.wait_stopped(mark)
            self.assertEqual(stop.results.get("signal-name"), "SIGINT", stop.line)
            frame = mi.send("-stack-info-frame")
            self.assertEqual(frame.cls, "done", frame.line)
            mark = len(mi.records)
            mi.send("-exec-continue")
            stop = mi.wait_stopped(mark)
            self.assertEqual(stop.results.get("exit-code"), "07", stop.line)

    def test_leader_exits_first_mi(self):
        run = run_gdb(["-exec-continue"], program="mt_leader_exit", mi=True)
        self.assertOutput(run, r'\*stopped,reason="exited",exit-code="07"')


class SteppedThreadExits(GdbTestCase):
    def test_next_over_pthread_exit(self):
        run = run_gdb(["break worker_marker", "break after_join", "continue", "finish", "next",
                       "info threads", "continue", "continue"],
                      program="mt_thread_exit")
        self.assertOrdered(run, [r"Breakpoint 1, worker_marker \(index=0\)",
                                 r"pthread_exit\(NULL\); /\* EXIT_LINE \*/"])
        # The stepped thread is gone; the others go on: worker 1 and main still stop at their
        # breakpoints and the program ends normally.
        self.assertOrdered(run, [r"Breakpoint 1, worker_marker \(index=1\)",
                                 r"Breakpoint 2, after_join", r"exited normally"])
        self.assertNoOutput(run, r"(?i)internal.error|Remote failure reply")

    def test_step_locked_thread_exits(self):
        """scheduler-locking on: the only resumed thread exits. gdb must get an answer (as from
        gdbserver: no resumed thread is left), not wait forever, and the rest goes on."""
        run = run_gdb(["break worker_marker", "continue", "finish", "set scheduler-locking on",
                       "next", "info threads", "thread 1", "set scheduler-locking off", "delete",
                       "continue"],
                      program="mt_thread_exit", timeout=60)
        self.assertOrdered(run, [r"Breakpoint 1, worker_marker \(index=0\)", r"EXIT_LINE",
                                 r"No unwaited-for children left",
                                 r"The current thread <Thread ID 2> has terminated",
                                 r"exited normally"])
        self.assertNoOutput(run, r"^\*?\s+2\s+Thread", "the exited thread is still listed")


class KilledFromOutside(GdbTestCase):
    def test_continue_after_sigkill_with_held_breakpoint_hits(self):
        """Threads hitting one breakpoint in a tight loop: at a stop, other threads' hits are held
        back. SIGKILL from outside, then `continue`: gdb must hear that the program was killed,
        not get a held hit of a dead thread whose registers are gone (E03)
        (gdb.threads/process-dies-while-detaching.exp, "killed outside")."""
        run = run_gdb(["break hit", "continue", "continue",
                       "python import os; os.kill(gdb.selected_inferior().pid, 9)",
                       "shell sleep 1", "continue"],
                      program="mt_bpstep", args=(100000, 4, 0), timeout=60)
        self.assertOutput(run, r"Program terminated with signal SIGKILL")
        self.assertNoOutput(run, r"Could not read registers|E03")


if __name__ == "__main__":
    unittest.main()
