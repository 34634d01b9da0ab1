"""The collectors agree: one program traced by every collector the server can create here (ptrace and
eBPF on the host; the module where /dev/gdbtrace exists) gives the same decoded values for every frame,
and those are the program's own values. Also: a breakpoint placed at an address an in-kernel collector
probes goes into a debug register, so gdb stops there and the tracepoint still collects every hit.

Tracee: tests/programs/trace_loop.c (probe_me(i, 3*i) for i < N; THREADS threads each call
probe_me(100 + id, k) for k < 5; then done())."""

import re
import shutil
import tempfile
import unittest
from pathlib import Path

from gdbtest import (NO_DEBUG_TRAPS, GdbTestCase, available_collectors, machine_delivers_debug_traps,
                     program, require, run_gdb)

N, THREADS = 6, 2

# Prints one canonical line per trace frame (gdb's Python API walks tfind like a user would).
DUMP_FRAMES = """python
import gdb
def _v(expr):
    return str(gdb.parse_and_eval(expr))
gdb.execute("tfind start", to_string=True)
while int(gdb.parse_and_eval("$trace_frame")) != -1:
    print("FRAME i=%s j=%s rdi=%s rsi=%s counter=%s name=%s arr=%s" % (
        _v("i"), _v("j"), _v("(int)$rdi"), _v("(int)$rsi"), _v("global_counter"),
        _v("global_ptr->name"), _v("global_array[1]@2")))
    try:
        gdb.execute("tfind", to_string=True)
    except gdb.error:
        break
end"""


def trace_with(backend):
    return run_gdb(["monitor gdbtrace backend " + backend, "break done",
                    "trace probe_me", "actions", "collect $regs, i, j, global_counter",
                    "collect *global_ptr, global_array[1]@2", "end",
                    "tstart", "continue", "tstop", "monitor gdbtrace status", "tstatus",
                    DUMP_FRAMES],
                   program="trace_loop", args=(N, THREADS))


def expected_frames():
    """The program's own values at each probe_me entry (global_counter is read before the call adds
    i + j to it); the threads' order among themselves is the scheduler's, so compare sorted."""
    frames, counter = [], 0
    calls = [(i, 3 * i) for i in range(N)] + [(100 + t, k) for t in range(THREADS) for k in range(5)]
    for n, (i, j) in enumerate(calls):
        frames.append((i, j, counter))
        counter += i + j
    return frames


class SameValuesEveryCollector(GdbTestCase):
    def frames_of(self, backend):
        run = trace_with(backend)
        self.assertRegex(run.output, rf"tracepoint \d+ at 0x[0-9a-f]+.*: backend {backend}\b",
                         run.transcript())
        lines = re.findall(r"^FRAME (.*)$", run.output, re.M)
        self.assertEqual(len(lines), N + 5 * THREADS, run.transcript())
        for line in lines:
            self.assertRegex(line, r'name="origin(\\000)*"', run.transcript())
            self.assertIn("arr={20, 30}", line, run.transcript())
            fields = dict(kv.split("=", 1) for kv in line.split()[:5])
            self.assertEqual(fields["i"], fields["rdi"], run.transcript())
            self.assertEqual(fields["j"], fields["rsi"], run.transcript())
        return sorted(lines), run

    def test_every_collector_decodes_the_same_values(self):
        found = [name for name in ("module", "ebpf", "ptrace") if name in available_collectors()]
        require(self, "ptrace" in found and len(found) >= 2,
                f"needs ptrace and an in-kernel collector to compare (found {found})")
        results = {name: self.frames_of(name) for name in found}
        reference, _ = results["ptrace"]
        # The main thread's calls are sequential, so their counters are exact; thread calls race on
        # global_counter (no lock in the tracee), so only their i/j are checked exactly.
        want_main = {(i, j, c) for i, j, c in expected_frames()[:N]}
        got_main = set()
        for line in reference:
            f = dict(kv.split("=", 1) for kv in line.split()[:5])
            if int(f["i"]) < 100:
                got_main.add((int(f["i"]), int(f["j"]), int(f["counter"])))
        self.assertEqual(got_main, want_main)
        want_ij = sorted((i, j) for i, j, _ in expected_frames())
        for name, (lines, run) in results.items():
            got_ij = sorted(tuple(int(dict(kv.split("=", 1) for kv in l.split()[:2])[k]) for k in ("i", "j"))
                            for l in lines)
            self.assertEqual(got_ij, want_ij, f"{name}:\n{run.transcript()}")
            main_lines = [l for l in lines if int(l.split()[0][2:]) < 100]
            ref_main = [l for l in reference if int(l.split()[0][2:]) < 100]
            self.assertEqual(main_lines, ref_main, f"{name} differs from ptrace:\n{run.transcript()}")


class BreakpointAtProbeSite(GdbTestCase):
    def test_breakpoint_stops_and_tracepoint_collects(self):
        kernel = [name for name in ("module", "ebpf") if name in available_collectors()]
        require(self, bool(kernel), "no in-kernel collector here")
        # gdb inserts breakpoints when it resumes, i.e. after tstart armed the probe, so the stub
        # must put this one in a debug register (an int3 under a uprobe would never report).
        if not machine_delivers_debug_traps():
            # No debug register will ever fire here: the breakpoint is refused with the reason
            # and the tracepoint still collects every hit.
            run = run_gdb(["monitor gdbtrace backend " + kernel[0], "break done", "trace probe_me",
                           "actions", "collect i", "end", "tstart", "break probe_me", "continue",
                           "delete 3", "continue", "tstop", "tstatus"], program="trace_loop", args=(N,))
            for pattern in (r"Cannot insert breakpoint 3", NO_DEBUG_TRAPS, r"Breakpoint 1, done",
                            rf"Collected {N} trace frames"):
                self.assertOutput(run, pattern)
            return
        run = run_gdb(["monitor gdbtrace backend " + kernel[0], "break done",
                       "trace probe_me", "actions", "collect i", "end", "tstart",
                       "break probe_me", "continue", "print i", "x/i $pc", "continue", "print i",
                       "delete 3", "continue", "tstop", "tstatus", "tfind 1", "print i"],
                      program="trace_loop", args=(N,))
        self.assertOrdered(run, [r"Breakpoint 3, probe_me \(i=0, j=0\)", r"\$1 = 0", r"=> 0x[0-9a-f]+ <probe_me\+\d+>:\s+mov ",
                                 r"Breakpoint 3, probe_me \(i=1, j=3\)", r"\$2 = 1",
                                 r"Breakpoint 1, done", rf"Collected {N} trace frames",
                                 r"Found trace frame 1", r"\$3 = 1"])
        # The uprobe's int3 is hidden from memory reads (else gdb "skips" it as a permanent one).
        self.assertNotRegex(run.output, r"int3|Target returns error|Error on target|SIGSEGV")

    def test_auto_backend_moves_the_tracepoint_when_no_debug_register_holds_the_breakpoint(self):
        kernel = [name for name in ("module", "ebpf") if name in available_collectors()]
        require(self, bool(kernel), "no in-kernel collector here")
        # A private copy of the program: a uprobe is per file and offset, so an eBPF tracepoint that a
        # test running in parallel holds on trace_loop's probe_me would take the int3 trap this
        # test's ptrace breakpoint writes there (the kernel single-steps it as a uprobe hit).
        private = Path(tempfile.mkdtemp(prefix="gdbtrace-move-")) / "trace_loop"
        shutil.copy2(program("trace_loop"), private)
        self.addCleanup(shutil.rmtree, private.parent, True)
        run = run_gdb(["monitor gdbtrace backend auto", "break done", "trace probe_me", "actions",
                       "collect i", "end", "tstart", "break probe_me", "continue", "print i", "continue",
                       "print i", "delete 3", "continue", "tstop", "tstatus", "monitor gdbtrace status",
                       "tfind 1", "print i"], program=str(private), args=(N,))
        # gdb's breakpoint stops the program either way and no hit goes uncollected.
        self.assertOrdered(run, [r"Breakpoint 3, probe_me \(i=0, j=0\)", r"\$1 = 0",
                                 r"Breakpoint 3, probe_me \(i=1, j=3\)", r"\$2 = 1",
                                 r"Breakpoint 1, done", rf"Collected {N} trace frames",
                                 r"Found trace frame 1", r"\$3 = 1"])
        if machine_delivers_debug_traps():  # the breakpoint went into a debug register
            self.assertOutput(run, rf"tracepoint 2 at 0x[0-9a-f]+: backend {kernel[0]}, hits {N}, "
                                   rf"frames {N}, drops 0")
            return
        # No debug register here (module collectors cannot give up one probe: refused there).
        if kernel[0] == "module":
            self.assertOutput(run, r"module removes its probes only all at once")
            return
        self.assertOutput(run, rf"tracepoint 2 at 0x[0-9a-f]+: backend ptrace, hits {N}, frames {N}, "
                               rf"drops 0, after stop 0, errors 0 \(moved from ebpf during the run: gdb's breakpoint "
                               rf"here needs the int3\)")
        # gdb's own output stays as with gdbserver: no console line about the move.
        self.assertNotRegex(run.output, r"cannot share|gdbtrace: tracepoint 2")
        self.assertNotRegex(run.output, r"Cannot insert breakpoint|Target returns error")

    def test_breakpoint_inserted_before_the_probe(self):
        kernel = [name for name in ("module", "ebpf") if name in available_collectors()]
        require(self, bool(kernel), "no in-kernel collector here")
        # always-inserted: gdb's int3 is in the program before tstart; the kernel's uprobe would adopt
        # it and consume every trap there, so the stub moves it into a debug register first.
        if not machine_delivers_debug_traps():
            # No debug register will ever fire here: tstart refuses the tracepoint, saying why,
            # and gdb's breakpoint keeps working.
            run = run_gdb(["set breakpoint always-inserted on", "monitor gdbtrace backend " + kernel[0],
                           "break done", "break probe_me", "trace probe_me", "actions", "collect i",
                           "end", "tstart", "continue", "print i", "tstop", "tstatus"],
                          program="trace_loop", args=(N,))
            for pattern in (r"tracepoint 3: \w+ cannot share the address with gdb's breakpoint",
                            r"does not deliver debug-register traps", r"Breakpoint 2, probe_me \(i=0, j=0\)",
                            r"\$1 = 0", r"Collected 0 trace frames"):
                self.assertOutput(run, pattern)
            return
        run = run_gdb(["set breakpoint always-inserted on", "monitor gdbtrace backend " + kernel[0],
                       "break done", "break probe_me", "trace probe_me", "actions", "collect i", "end",
                       "tstart", "continue", "print i", "continue", "print i", "delete 2", "continue",
                       "tstop", "tstatus", "monitor gdbtrace status"],
                      program="trace_loop", args=(N,))
        self.assertOrdered(run, [r"Breakpoint 2, probe_me \(i=0, j=0\)", r"\$1 = 0",
                                 r"Breakpoint 2, probe_me \(i=1, j=3\)", r"\$2 = 1",
                                 r"Breakpoint 1, done", rf"Collected {N} trace frames",
                                 rf"tracepoint 3 at 0x[0-9a-f]+: backend {kernel[0]}, hits {N}"])


class OneCollectorKindPerAddress(GdbTestCase):
    def test_ptrace_tracepoint_under_a_kernel_probe_is_refused(self):
        kernel = [name for name in ("module", "ebpf") if name in available_collectors()]
        require(self, bool(kernel), "no in-kernel collector here")
        # while-stepping needs ptrace; the plain tracepoint at the same address goes in-kernel. The
        # uprobe would swallow the ptrace trap (a tracepoint that silently never hits): refused.
        run = run_gdb(["break done", "trace probe_me", "actions", "collect i", "end",
                       "trace probe_me", "actions", "while-stepping 1", "collect $rip", "end", "end",
                       "tstart", "tstatus"], program="trace_loop", args=(N,))
        self.assertOutput(run, rf"ptrace cannot share the address with tracepoint 2 \(collected by "
                               rf"{kernel[0]}\)")
        self.assertOutput(run, r"Collected 0 trace frames")


if __name__ == "__main__":
    unittest.main()
