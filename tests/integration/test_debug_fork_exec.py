"""fork (follow-fork-mode parent/child, detach-on-fork off) and exec."""

import unittest

from gdbtest import GdbTestCase, run_gdb


class Fork(GdbTestCase):
    def test_follow_parent(self):
        run = run_gdb(["break in_parent", "break in_child", "continue", "print child > 0", "continue"],
                      program="fork")
        self.assertOrdered(run, [r"Detaching after fork from child process \d+",
                                 r"Breakpoint 1, in_parent", r"\$1 = 1", r"exited normally"])
        self.assertNoOutput(run, r"Breakpoint 2, in_child")
        self.assertServerLog(run, r"child: child_value=42")
        self.assertServerLog(run, r"parent: child exited 7")

    def test_follow_child(self):
        run = run_gdb(["set follow-fork-mode child", "break in_child", "continue", "print child_value",
                       "next", "print child_value", "info inferiors", "continue"],
                      program="fork")
        self.assertOrdered(run, [r"Attaching after .* fork to child",
                                 r"New inferior 2 \(process \d+\)",
                                 r"Detaching after fork from parent process \d+",
                                 r"Breakpoint 1, in_child \(\)",
                                 r"\$1 = 0", r"\$2 = 42",
                                 r"\* 2\s+process \d+",
                                 r"Inferior 2 \(process \d+\) exited with code 07"])
        self.assertServerLog(run, r"parent: child exited 7")

    def test_detach_on_fork_off(self):
        run = run_gdb(["set detach-on-fork off", "break in_parent", "break in_child", "continue",
                       "info inferiors", "inferior 2", "continue", "print child_value", "continue",
                       "inferior 1", "continue"],
                      program="fork")
        self.assertOrdered(run, [r"New inferior 2 \(process \d+\)",
                                 r"Breakpoint 1(\.\d+)?, in_parent",
                                 r"\*? 1\s+process \d+ .*\n.*2\s+process \d+",
                                 r"Switching to inferior 2",
                                 r"Breakpoint 2(\.\d+)?, in_child",
                                 r"\$1 = 0",
                                 r"Inferior 2 \(process \d+\) exited with code 07",
                                 r"Switching to inferior 1",
                                 r"Inferior 1 \(process \d+\) exited normally"])

    def test_catch_fork(self):
        run = run_gdb(["catch fork", "continue", "info inferiors", "continue"], program="fork")
        self.assertOrdered(run, [r"Catchpoint 1 \(fork\)", r"Catchpoint 1 \(forked process \d+\)",
                                 r"exited normally"])


class Exec(GdbTestCase):
    def test_breakpoint_in_execd_program(self):
        run = run_gdb(["set breakpoint pending on", "break exec_target_marker", "continue", "bt",
                       "info inferiors", "continue"],
                      program="exec")
        self.assertOrdered(run, [r"process \d+ is executing new program: .*/exec_target",
                                 r"Breakpoint 1, exec_target_marker \(arg=0x[0-9a-f]+ \"from-exec\"\)",
                                 r"#1  0x[0-9a-f]+ in main \(argc=2",
                                 r"exec_target",
                                 r"exited normally"])
        self.assertServerLog(run, r"exec_target running: from-exec")

    def test_catch_exec(self):
        run = run_gdb(["catch exec", "continue", "info inferiors", "continue"], program="exec")
        self.assertOrdered(run, [r"Catchpoint 1 \(exec\)",
                                 r"Catchpoint 1 \(exec'd .*/exec_target\)",
                                 r"exited normally"])

    def test_follow_exec_mode_new(self):
        run = run_gdb(["set follow-exec-mode new", "set breakpoint pending on", "break exec_target_marker",
                       "continue", "info inferiors", "continue"],
                      program="exec")
        self.assertOrdered(run, [r"is executing new program: .*/exec_target",
                                 r"Breakpoint 1, exec_target_marker",
                                 r"\* 2\s+process \d+\s+.*exec_target",
                                 r"exited normally"])


if __name__ == "__main__":
    unittest.main()
