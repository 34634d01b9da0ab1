"""Hardware watchpoints through the stub (Z2/Z3/Z4 packets, debug registers of the tracee)."""

import unittest

from gdbtest import GdbTestCase, run_gdb


class Watchpoints(GdbTestCase):
    def test_write_watchpoint(self):
        run = run_gdb(["break main", "continue", "watch counter", "continue", "continue", "bt 1",
                       "delete", "continue"],
                      program="watch")
        self.assertOrdered(run, [r"Hardware watchpoint 2: counter",
                                 r"Old value = 0\s+New value = 1",
                                 r"bump_counter \(by=1\)",
                                 r"Old value = 1\s+New value = 3",
                                 r"#0  bump_counter \(by=2\)",
                                 r"exited normally"])
        self.assertServerLog(run, r"counter=15 observed=20")

    def test_read_watchpoint(self):
        run = run_gdb(["break main", "continue", "rwatch counter", "continue", "bt 1", "continue",
                       "delete", "continue"],
                      program="watch")
        self.assertOrdered(run, [r"Hardware read watchpoint 2: counter",
                                 r"Value = 0",
                                 r"#0  .* in bump_counter \(by=1\)",
                                 r"Value = 1",
                                 r"read_counter \(\)"])

    def test_access_watchpoint(self):
        run = run_gdb(["break main", "continue", "awatch counter", "continue", "continue", "continue",
                       "delete", "continue"],
                      program="watch")
        self.assertOrdered(run, [r"Hardware access \(read/write\) watchpoint 2: counter",
                                 r"(Value = 0|Old value = 0\s+New value = 1)",
                                 r"Hardware access \(read/write\) watchpoint 2: counter",
                                 r"Hardware access \(read/write\) watchpoint 2: counter",
                                 r"exited normally"])

    def test_watch_local_goes_out_of_scope(self):
        run = run_gdb(["break bump_counter", "continue", "watch by", "continue", "continue"],
                      program="watch")
        self.assertOutput(run, r"Watchpoint 2 deleted because the program has left the block")

    def test_watch_condition(self):
        run = run_gdb(["break main", "continue", "watch counter if counter > 5", "continue", "print counter",
                       "delete", "continue"],
                      program="watch")
        self.assertOrdered(run, [r"Old value = 3\s+New value = 6", r"\$1 = 6", r"exited normally"])

    def test_info_watchpoints_hit_counts(self):
        run = run_gdb(["break main", "continue", "watch counter", "continue", "continue",
                       "info watchpoints"],
                      program="watch")
        self.assertOutput(run, r"hw watchpoint\s+keep y\s+counter\s+breakpoint already hit 2 times")


if __name__ == "__main__":
    unittest.main()
