"""Shared libraries: `info sharedlibrary` from the stub's library list, breakpoints pending on a
library that is not loaded yet."""

import unittest

from gdbtest import GdbTestCase, run_gdb


class SharedLibraries(GdbTestCase):
    def test_info_sharedlibrary(self):
        run = run_gdb(["break main", "continue", "info sharedlibrary"], program="main_uses_libgreet")
        self.assertOutput(run, r"0x[0-9a-f]+\s+0x[0-9a-f]+\s+Yes\s+.*/libgreet\.so")
        self.assertOutput(run, r"0x[0-9a-f]+\s+0x[0-9a-f]+\s+Yes( \(\*\))?\s+.*libc\.so\.6")
        self.assertOutput(run, r"ld-linux-x86-64\.so\.2")

    def test_pending_breakpoint_in_library(self):
        run = run_gdb(["set breakpoint pending on", "break libgreet.c:7", "info breakpoints", "run",
                       "print who", "print greet_calls", "bt", "continue", "print who", "delete", "continue"],
                      program="main_uses_libgreet", mode="multi")
        self.assertOrdered(run, [r"Breakpoint 1 \(libgreet\.c:7\) pending\.",
                                 r"<PENDING>\s+libgreet\.c:7",
                                 r"Breakpoint 1, greet \(who=0x[0-9a-f]+ \"world\"\) at .*libgreet\.c:7",
                                 r"\$1 = 0x[0-9a-f]+ \"world\"",
                                 r"\$2 = 0",
                                 r"#1  0x[0-9a-f]+ in main \(\) at .*main_uses_libgreet\.c",
                                 r"Breakpoint 1, greet \(who=0x[0-9a-f]+ \"again\"\)",
                                 r"exited normally"])
        self.assertServerLog(run, r"hello, again \(2\)")

    def test_library_function_breakpoint_and_finish(self):
        run = run_gdb(["break greet", "continue", "finish", "continue", "delete", "continue"],
                      program="main_uses_libgreet")
        self.assertOrdered(run, [r"Breakpoint 1, greet \(who=.*\"world\"\)",
                                 r"Value returned is \$1 = 17",
                                 r"Breakpoint 1, greet \(who=.*\"again\"\)",
                                 r"exited normally"])

    def test_stop_on_solib_events(self):
        run = run_gdb(["set stop-on-solib-events 1", "continue", "info sharedlibrary",
                       "set stop-on-solib-events 0", "continue"],
                      program="main_uses_libgreet")
        self.assertOutput(run, r"Stopped due to shared library event")
        self.assertOutput(run, r"exited normally")


if __name__ == "__main__":
    unittest.main()
