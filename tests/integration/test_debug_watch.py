"""Hardware watchpoints through the stub (Z2/Z3/Z4 packets, debug registers of the tracee).

On a machine whose hypervisor never raises debug-register traps (tests/programs/dr_probe says so),
each test instead checks that the stub refuses the watchpoint and says why on gdb's console:
gdbserver accepts it there and the program runs past every write."""

import unittest

from gdbtest import NO_DEBUG_TRAPS, GdbTestCase, machine_delivers_debug_traps, run_gdb


class Watchpoints(GdbTestCase):
    def refused_here(self, commands):
        """True (after checking the refusal) where the machine delivers no debug traps."""
        if machine_delivers_debug_traps():
            return False
        run = run_gdb(commands + ["continue", "delete", "continue"], program="watch", extended=False)
        for pattern in (r"Could not insert hardware", NO_DEBUG_TRAPS, r"exited normally"):
            self.assertOutput(run, pattern)  # gdb's stderr and stdout: no order between them
        return True

    def test_software_watchpoint(self):
        # What the refusal's advice leads to; works on every machine.
        run = run_gdb(["break main", "continue", "set can-use-hw-watchpoints 0", "watch counter",
                       "continue", "continue", "delete", "continue"], program="watch")
        self.assertOrdered(run, [r"Watchpoint 2: counter", r"Old value = 0\s+New value = 1",
                                 r"Old value = 1\s+New value = 3", r"exited normally"])

    def test_write_watchpoint(self):
        if self.refused_here(["break main", "continue", "watch counter"]):
            return
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
        if self.refused_here(["break main", "continue", "rwatch counter"]):
            return
        run = run_gdb(["break main", "continue", "rwatch counter", "continue", "bt 1", "continue",
                       "delete", "continue"],
                      program="watch")
        self.assertOrdered(run, [r"Hardware read watchpoint 2: counter",
                                 r"Value = 0",
                                 r"#0  .* in bump_counter \(by=1\)",
                                 r"Value = 1",
                                 r"read_counter \(\)"])

    def test_access_watchpoint(self):
        if self.refused_here(["break main", "continue", "awatch counter"]):
            return
        run = run_gdb(["break main", "continue", "awatch counter", "continue", "continue", "continue",
                       "delete", "continue"],
                      program="watch")
        self.assertOrdered(run, [r"Hardware access \(read/write\) watchpoint 2: counter",
                                 r"(Value = 0|Old value = 0\s+New value = 1)",
                                 r"Hardware access \(read/write\) watchpoint 2: counter",
                                 r"Hardware access \(read/write\) watchpoint 2: counter",
                                 r"exited normally"])

    def test_watch_local_goes_out_of_scope(self):
        if self.refused_here(["break bump_counter", "continue", "watch by"]):
            return
        run = run_gdb(["break bump_counter", "continue", "watch by", "continue", "continue"],
                      program="watch")
        self.assertOutput(run, r"Watchpoint 2 deleted because the program has left the block")

    def test_watch_condition(self):
        if self.refused_here(["break main", "continue", "watch counter if counter > 5"]):
            return
        run = run_gdb(["break main", "continue", "watch counter if counter > 5", "continue", "print counter",
                       "delete", "continue"],
                      program="watch")
        self.assertOrdered(run, [r"Old value = 3\s+New value = 6", r"\$1 = 6", r"exited normally"])

    def test_info_watchpoints_hit_counts(self):
        if self.refused_here(["break main", "continue", "watch counter"]):
            return
        run = run_gdb(["break main", "continue", "watch counter", "continue", "continue",
                       "info watchpoints"],
                      program="watch")
        self.assertOutput(run, r"hw watchpoint\s+keep y\s+counter\s+breakpoint already hit 2 times")


if __name__ == "__main__":
    unittest.main()
