"""What a user meets at the edges of a trace session: the help the monitor points to, a run that
has no tracepoint location at all, the trace once the program has ended, and what a saved file
says about registers.

- `monitor gdbtrace help` lists the subcommands and the collectors (`monitor help` points to it).
- A pending tracepoint on a name that exists nowhere: gdb sends no location and says nothing at
  `tstart` (its own pending.exp wants that silence: the library may load during the run), so the
  stub says it at tstop or at the program's exit.
- The program ends during or after a run: with `target extended-remote` the trace stays in the
  stub (tstatus, tsave work) and gdb is told that tfind needs a saved copy (gdb shows a trace frame
  only in a live thread: "No registers.", stock gdbserver too); with `target remote` gdb closes the
  connection at the exit, so the stub saves the trace to a file first and names it.
- Plain `tsave` is gdb's own writer (every register of the 'R' block gets a value): the stub says
  so when it happens; `tsave -r` keeps what was available live, `$fs_base` included.

Tracee: tests/programs/trace_loop.c."""

import os
import re
import tempfile
import unittest

from gdbtest import GdbTestCase, available_collectors, require, run_gdb

BACKEND = os.environ.get("GDBTRACE_TEST_BACKEND", "auto")
TRACE = ["monitor gdbtrace backend " + BACKEND, "trace probe_me", "actions", "collect $regs, i",
         "end"]


class MonitorHelp(GdbTestCase):
    def test_gdbtrace_help_lists_commands_and_collectors(self):
        run = run_gdb(["monitor help", "monitor gdbtrace help", "monitor gdbtrace frob"],
                      program="trace_loop", args=(1,))
        self.assertOutput(run, r"^  gdbtrace help$")  # monitor help names it...
        self.assertOrdered(run, [r"^gdbtrace monitor commands:", r"^  gdbtrace status$",
                                 r"^  gdbtrace backend \[module\|ebpf\|ptrace\|auto\]$",
                                 r"^  gdbtrace stacks \[on \[BYTES\] \| off\]$",
                                 r"^backend selection: ", r"^  ptrace: ",
                                 r"^gdbtrace: unknown command 'frob'", r"^gdbtrace monitor commands:"])
        self.assertNoOutput(run, r"unknown command; use:")


class EmptyRun(GdbTestCase):
    def test_pending_tracepoint_that_never_resolves_is_reported(self):
        run = run_gdb(["set breakpoint pending on", "trace no_such_function_anywhere", "tstart",
                       "tstatus", "continue"], program="trace_loop", args=(3,))
        at_stop = run_gdb(["set breakpoint pending on", "trace no_such_function_anywhere", "tstart",
                           "tstop"], program="trace_loop", args=(3,))
        self.assertOutput(at_stop, r"^gdbtrace: this trace run has no tracepoint location")
        # gdb prints its own lines on stdout and the stub's console text on stderr.
        self.assertOrdered(run, [r"Tracepoint 1 \(no_such_function_anywhere\) pending",
                                 r"Trace is running on the target", r"exited normally"])
        self.assertOutput(run, r"^gdbtrace: this trace run has no tracepoint location, so nothing "
                               r"is collected")
        self.assertEqual(run.output.count("has no tracepoint location"), 1, run.transcript())

    def test_run_with_a_location_says_nothing(self):
        run = run_gdb(TRACE + ["tstart", "tstatus", "tstop", "info tracepoints"], program="trace_loop",
                      args=(3,))
        self.assertNoOutput(run, r"no tracepoint location")


class TraceAfterTheProgramEnds(GdbTestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="gdbtrace-session-end-")

    def tearDown(self):
        self.tmp.cleanup()

    def test_extended_remote_keeps_the_trace_and_says_how_to_read_it(self):
        path = os.path.join(self.tmp.name, "after-exit.tf")
        # tfind's error ends a batch script: it comes last.
        run = run_gdb(TRACE + ["tstart", "continue", "tstatus", f"tsave {path}", "tfind 0"],
                      program="trace_loop", args=(4,))
        self.assertOrdered(run, [r"exited normally", r"Collected 4 trace frames"])
        self.assertOutput(run, r"^gdbtrace: process \d+ ended; its trace \(4 frames\) stays in "
                               r"gdbtrace-server until the next tstart")
        self.assertOutput(run, r"^gdbtrace: no program is running, so gdb has no thread")
        self.assertOutput(run, r"^No registers\.$")  # gdb's own answer (stock gdbserver too)
        self.assertEqual(run.output.count("no program is running"), 1, run.transcript())
        back = run_gdb([f"target tfile {path}", "tfind 3", "print $rdi"], connect=False)
        self.assertOrdered(back, [r"Found trace frame 3", r"^\$1 = 3$"])

    def test_saved_trace_is_not_announced_again(self):
        path = os.path.join(self.tmp.name, "saved.tf")
        run = run_gdb(TRACE + ["break done", "tstart", "continue", "tstop", f"tsave -r {path}",
                               "continue"], program="trace_loop", args=(2,))
        self.assertOutput(run, r"exited normally")
        self.assertNoOutput(run, r"its trace \(\d+ frames\)")

    def test_target_remote_saves_the_trace_before_gdb_closes_the_connection(self):
        run = run_gdb(TRACE + ["tstart", "continue"], program="trace_loop", args=(5,), extended=False,
                      server_env={"TMPDIR": self.tmp.name})
        m = re.search(r"gdbtrace: process \d+ ended; its trace \(5 frames\) was saved to (\S+) ", run.output)
        self.assertTrue(m, run.transcript())
        saved = m.group(1)
        self.assertEqual(os.path.dirname(saved), self.tmp.name, "the file goes to $TMPDIR")
        self.assertOutput(run, r"exited normally")
        back = run_gdb([f"target tfile {saved}", "tstatus", "tfind 4", "print $rdi"], connect=False)
        self.assertOrdered(back, [r"Collected 5 trace frames", r"Found trace frame 4", r"^\$1 = 4$"])


class SavedRegisters(GdbTestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="gdbtrace-saved-regs-")

    def tearDown(self):
        self.tmp.cleanup()

    def test_plain_tsave_says_what_it_cannot_keep(self):
        # eBPF frames lack x87/SSE (ptrace frames hold every register: nothing to say there).
        require(self, "ebpf" in available_collectors(), "the eBPF collector is not available here", key="no-ebpf")
        path = os.path.join(self.tmp.name, "plain.tf")
        run = run_gdb(["monitor gdbtrace backend ebpf", "break done", "trace probe_me", "actions",
                       "collect $rdi", "end", "tstart", "continue", "tstop", f"tsave {path}"],
                      program="trace_loop", args=(2,))
        self.assertOutput(run, r"^gdbtrace: in a file written by plain `tsave`, registers a frame did "
                               r"not collect read as 0")
        self.assertTrue(os.path.getsize(path) > 0, run.transcript())

    def saved_and_read_back(self, backend):
        path = os.path.join(self.tmp.name, backend + ".tf")
        live = run_gdb(["monitor gdbtrace backend " + backend, "break done", "trace probe_me", "actions",
                        "collect $regs", "end", "tstart", "continue", "tstop", "tfind 0",
                        "print/x $fs_base", "tfind none", f"tsave -r {path}"],
                       program="trace_loop", args=(2,))
        fs_base = re.search(r"^\$1 = (0x[0-9a-f]+)$", live.output, re.MULTILINE)
        self.assertTrue(fs_base and int(fs_base.group(1), 16) != 0, live.transcript())
        back = run_gdb([f"target tfile {path}", "tfind 0", "print/x $fs_base", "print $rdi"],
                       connect=False)
        return live, back, fs_base.group(1)

    def test_tsave_r_keeps_fs_base_of_frames_with_every_register(self):
        live, back, fs_base = self.saved_and_read_back("ptrace")
        self.assertOutput(back, r"^\$1 = " + fs_base + "$")
        self.assertNoOutput(live, r"reads them back as <unavailable>")

    def test_tsave_r_says_what_gdb_cannot_read_back(self):
        # Kernel collectors' frames lack ds/es/fs/gs and x87/SSE; gdb 13's tfile reader stops at
        # the first register a frame lacks in its own order, so $fs_base, in the file, reads
        # <unavailable>: the stub says so at tsave -r instead of letting it pass for "not collected".
        require(self, "ebpf" in available_collectors(), "the eBPF collector is not available here", key="no-ebpf")
        live, back, _ = self.saved_and_read_back("ebpf")
        self.assertOutput(live, r"^gdbtrace: the saved file holds (\$\w+, )*\$fs_base(, \$\w+)* of every "
                                r"frame, but gdb reads them back as <unavailable>")
        self.assertOutput(back, r"^\$1 = <unavailable>$")
        self.assertOutput(back, r"^\$2 = 0$")  # frame 0: probe_me(0, 0)


if __name__ == "__main__":
    unittest.main()
