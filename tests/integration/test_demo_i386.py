"""The quick-start demo program (tests/programs/demo.c) built as an i386 program (gcc -m32:
m32_quickstart_demo), debugged and traced end to end as the README's walkthrough does it with the
x86-64 build: break, bt, a struct through a pointer, an array element, threads, finish; then a
tracepoint collecting *p, tick and total_steps, tfind, tdump. The same test passes against stock
gdbserver 13 (GDBTRACE_SERVER=/usr/bin/gdbserver), whose tracepoints trap too."""

import unittest

from gdbtest import GdbTestCase, Server, is_stock_gdbserver, program, run_gdb

PROGRAM = "m32_quickstart_demo"


class DemoI386(GdbTestCase):
    def test_debug(self):
        run = run_gdb(["break step_particle", "continue", "bt", "print *p", "print particles[1].pos",
                       "info threads", "print sizeof(long)", "print $pc == $eip", "finish"],
                      program=PROGRAM, args=(5, 0))
        self.assertOrdered(run, [r"Breakpoint 1, step_particle \(p=0x[0-9a-f]{8} <particles>, tick=0\)",
                                 r"^#0 +step_particle \(p=0x[0-9a-f]{8} <particles>, tick=0\)",
                                 r"^#1 +0x[0-9a-f]{8} in main \(argc=3, argv=0x[0-9a-f]{8}\)",
                                 r'^\$1 = \{id = 0, name = "particle-0(\\000)*", pos = \{x = 0, y = 0\}, '
                                 r"vel = \{x = 1\.5, y = 0\}, hits = 0\}",
                                 r"^\$2 = \{x = 10, y = 5\}",
                                 r"^\* 1 +Thread [0-9.]+ .*step_particle",
                                 r"^\$3 = 4$", r"^\$4 = 1$",
                                 r"^Value returned is \$5 = 1$"])

    def test_run_from_a_multi_server(self):
        """As scripts/demo.sh serves it: gdb connects to a --multi stub before there is a process.
        The stub then gives no target description (as gdbserver): an x86-64 one would make gdb
        reject it against the i386 executable ("Architecture rejected target-supplied description")."""
        with Server("multi") as server:
            run = run_gdb([f"target extended-remote {server.address}", f"set remote exec-file {program(PROGRAM)}",
                           "set args 3 0", "break step_particle", "run", "print sizeof(void *)", "print $eip == $pc"],
                          program=PROGRAM, server=server, connect=False)
        self.assertNoOutput(run, r"Architecture rejected|not compatible with reported target architecture")
        self.assertOrdered(run, [r"Breakpoint 1, step_particle", r"^\$1 = 4$", r"^\$2 = 1$"])

    def test_trace(self):
        run = run_gdb(["break main", "continue", "trace step_particle", "actions",
                       "collect *p, tick, total_steps", "end", "tstart", "break exit", "continue",
                       "tstop", "tstatus", "tfind 5", "print tick", "print *p", "print total_steps",
                       "print/x $eip", "info symbol $eip", "tdump", "tfind none", "info tracepoints"],
                      program=PROGRAM, args=(20, 0))
        self.assertOrdered(run, [r"Collected 20 trace frames",
                                 r"Found trace frame 5, tracepoint 2",
                                 r"^\$1 = 5$",
                                 r'^\$2 = \{id = 5, name = "particle-5(\\000)*", pos = \{x = 50, y = 25\}, '
                                 r"vel = \{x = 6\.5, y = 2\.5\}, hits = 0\}",
                                 r"^\$3 = 5$", r"^\$4 = 0x[0-9a-f]{8}$", r"^step_particle \+ \d+ in section \.text",
                                 r"^tick = 5$",
                                 r"tracepoint already hit \d+ times"])
        if not is_stock_gdbserver():  # stock gdbserver 13 says 32 here (it counts more than hits)
            self.assertOutput(run, r"tracepoint already hit 20 times")


if __name__ == "__main__":
    unittest.main()
