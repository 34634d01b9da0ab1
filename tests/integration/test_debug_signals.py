"""Signals: stop/print/pass handling, delivery to the inferior's handler, suppression, $_siginfo."""

import unittest

from gdbtest import GdbTestCase, run_gdb


class Signals(GdbTestCase):
    def test_signals_stop_and_are_delivered(self):
        run = run_gdb(["continue", "print $_siginfo.si_signo", "continue", "continue"], program="signals")
        self.assertOrdered(run, [r"Program received signal SIGUSR1, User defined signal 1\.",
                                 r"\$1 = 10",
                                 r"Program received signal SIGUSR2, User defined signal 2\.",
                                 r"exited normally"])
        self.assertServerLog(run, r"usr1_hits=1 usr2_hits=1")

    def test_handle_nostop_pass(self):
        run = run_gdb(["handle SIGUSR1 nostop noprint pass", "continue", "continue"], program="signals")
        self.assertNoOutput(run, r"Program received signal SIGUSR1")
        self.assertOrdered(run, [r"Program received signal SIGUSR2", r"exited normally"])
        self.assertServerLog(run, r"usr1_hits=1 usr2_hits=1")

    def test_handle_nopass_suppresses_delivery(self):
        run = run_gdb(["handle SIGUSR1 stop print nopass", "break after_signals", "continue", "continue",
                       "continue", "print usr1_hits", "print usr2_hits", "continue"],
                      program="signals")
        self.assertOrdered(run, [r"Program received signal SIGUSR1", r"Program received signal SIGUSR2",
                                 r"Breakpoint 1, after_signals", r"\$1 = 0", r"\$2 = 1",
                                 r"exited normally"])
        self.assertServerLog(run, r"usr1_hits=0 usr2_hits=1")

    def test_signal_0_discards_and_signal_cmd_sends(self):
        # `signal 0` resumes without delivering the pending SIGUSR1; `signal SIGUSR1` at SIGUSR2's stop
        # delivers SIGUSR1 instead of SIGUSR2.
        run = run_gdb(["continue", "signal 0", "signal SIGUSR1", "continue"], program="signals")
        self.assertOrdered(run, [r"Program received signal SIGUSR1", r"Continuing with no signal\.|",
                                 r"Program received signal SIGUSR2", r"exited normally"])
        self.assertServerLog(run, r"usr1_hits=1 usr2_hits=0")

    def test_handler_breakpoint_and_backtrace_through_signal_frame(self):
        run = run_gdb(["break usr1_handler", "continue", "continue", "bt"], program="signals")
        self.assertOrdered(run, [r"Program received signal SIGUSR1",
                                 r"Breakpoint 1, usr1_handler \(sig=10\)",
                                 r"#0  usr1_handler \(sig=10\)",
                                 r"<signal handler called>",
                                 r"in main \(\)"])

    def test_fatal_signal_reported(self):
        run = run_gdb(["break after_signals", "continue", "continue", "continue",
                       "print (int)kill((int)getpid(), 11)", "continue", "continue"],
                      program="signals")
        self.assertOutput(run, r"Program received signal SIGSEGV, Segmentation fault\.")
        self.assertOutput(run, r"Program terminated with signal SIGSEGV, Segmentation fault\.")


if __name__ == "__main__":
    unittest.main()
