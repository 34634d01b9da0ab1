"""Counts that add up, per tracepoint location, and stop reasons in gdb's own words.

A gdb tracepoint has one number and N locations (one QTDP each): every status view counts each
location on its own (gdb's `info tracepoints` sums qTP over the locations), a frame shows the pc of
the location that took it, and a `tsave -r` file read back in a fresh gdb maps every frame to its
location. For every location hits = frames + drops + hits after the stop (a collector still sees
hits between a tfull and the removal of its probes). A collection a kernel collector refuses names
the size that made it refuse. (The stop reason of a process that exits or is killed is checked in
test_faults.py, TraceeGone.)

Tracees: tests/programs/multi_location.c (record() inlined at two call sites: `trace record` has
two locations, hit 3 and 5 times), tests/programs/trace_loop.c."""

import os
import re
import tempfile
import unittest

from gdbtest import GdbTestCase, auto_backend, available_collectors, program, require, run_gdb
from test_plugin_export import PLUGIN

FIRST_HITS, SECOND_HITS = 3, 5
# "after stop" is optional here so that a stub without it fails on the counts, not on the regex.
STATUS_ROW = (r"^tracepoint (\d+) at (0x[0-9a-f]+): backend (\w+), hits (\d+), frames (\d+), "
              r"drops (\d+)(?:, after stop (\d+))?, errors (\d+)")


def status_rows(text):
    """(number, address, backend, hits, frames, drops, after_stop, errors) per `monitor gdbtrace
    status` row (after_stop None when the row has none)."""
    return [(int(m[0]), int(m[1], 16), m[2]) + tuple(int(x) if x else None for x in m[3:])
            for m in re.findall(STATUS_ROW, text, re.MULTILINE)]


class MultiLocationCounts(GdbTestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="gdbtrace-counts-")
        self.tfile = os.path.join(self.tmp.name, "multi.tf")

    def tearDown(self):
        self.tmp.cleanup()

    def run_multi_location(self, backend):
        # `collect sink` makes frames without an 'R' block: the pc of a frame is then the location's.
        return run_gdb(["source %s" % PLUGIN, "monitor gdbtrace backend " + backend, "break done",
                        "trace record", "actions", "collect sink", "end", "tstart", "continue", "tstop",
                        "tstatus", "info tracepoints", "monitor gdbtrace status", "gdbtrace status",
                        "tfind 0", "print $pc", "tfind 4", "print $pc", "tfind none",
                        f"tsave -r {self.tfile}", "print/x (long) &done"],
                       program="multi_location", args=(FIRST_HITS, SECOND_HITS))

    def read_back(self, live):
        # The fresh gdb gets the program's symbols where the live process had them (PIE).
        live_done = int(re.findall(r"\$\d+ = (0x[0-9a-f]+)", live.output)[-1], 16)
        static = run_gdb(["print/x (long) &done"], program="multi_location", connect=False)
        offset = live_done - int(re.search(r"\$1 = (0x[0-9a-f]+)", static.output).group(1), 16)
        return run_gdb([f"add-symbol-file {program('multi_location')} -o {offset:#x}",
                        f"target tfile {self.tfile}", "info tracepoints", "tstatus",
                        "tfind 0", "print $pc", "print sink", "tfind 4", "print $pc", "print sink"],
                       connect=False)

    def check(self, backend):
        live = self.run_multi_location(backend)
        self.assertOutput(live, r"Tracepoint 2 at 0x[0-9a-f]+: record\. \(2 locations\)")
        rows = status_rows(live.output)
        self.assertEqual([r[3:7] for r in rows], [(FIRST_HITS, FIRST_HITS, 0, 0),
                                                  (SECOND_HITS, SECOND_HITS, 0, 0)],
                         live.transcript())
        first, second = rows[0][1], rows[1][1]
        # gdb sums qTP over the locations (tstatus asks for them).
        self.assertOutput(live, rf"tracepoint already hit {FIRST_HITS + SECOND_HITS} times")
        # The plugin's table: one row per location with its own counts.
        for address, hits in ((first, FIRST_HITS), (second, SECOND_HITS)):
            self.assertOutput(live, rf"^2\s+{address:#x}\s+{backend}\s+{hits}\s+{hits}\s+0\s+0\s+0\s")
        # Live, a frame is shown where it was taken.
        self.assertOrdered(live, [r"Found trace frame 0, tracepoint 2",
                                  rf"^\$\d+ = \(void \(\*\)\(\)\) {first:#x} <first_site\+\d+>",
                                  r"Found trace frame 4, tracepoint 2",
                                  rf"^\$\d+ = \(void \(\*\)\(\)\) {second:#x} <second_site\+\d+>"])

        back = self.read_back(live)
        # One tracepoint per location, each with its own counts; every frame at its location.
        self.assertOutput(back, rf"^\d+\s+tracepoint\s+keep y\s+0x0*{first:x} in record at ")
        self.assertOutput(back, rf"^\d+\s+tracepoint\s+keep y\s+0x0*{second:x} in record at ")
        self.assertOrdered(back, [rf"0x0*{second:x} in record", rf"already hit {SECOND_HITS} times"])
        self.assertOrdered(back, [rf"0x0*{first:x} in record", rf"already hit {FIRST_HITS} times"])
        self.assertOutput(back, rf"Collected {FIRST_HITS + SECOND_HITS} trace frames")
        self.assertNoOutput(back, r"cannot infer \$pc|PC register is not available")
        self.assertOrdered(back, [r"Found trace frame 0, tracepoint \d+",
                                  rf"^\$\d+ = \(void \(\*\)\(\)\) {first:#x} <first_site\+\d+>",
                                  r"^\$\d+ = 0$",
                                  r"Found trace frame 4, tracepoint \d+",
                                  rf"^\$\d+ = \(void \(\*\)\(\)\) {second:#x} <second_site\+\d+>",
                                  rf"^\$\d+ = {sum(range(FIRST_HITS)) + 1000}$"])  # sink before record(1001)

    def test_ebpf(self):
        require(self, "ebpf" in available_collectors(), "the eBPF collector is not available here", key="no-ebpf")
        self.check("ebpf")

    def test_ptrace(self):
        require(self, "ptrace" in available_collectors(), "the ptrace collector is not available here")
        self.check("ptrace")


class CountsAddUp(GdbTestCase):
    def test_buffer_full_hits_are_frames_drops_or_after_stop(self):
        # 400 hits into a buffer of a few frames: the run stops with tfull while the program goes on
        # hitting the probe until the collector's probes are out.
        backend = auto_backend()
        run = run_gdb(["source %s" % PLUGIN, "set trace-buffer-size 8192", "break done",
                       "trace probe_me", "actions", "collect $regs", "end", "tstart", "continue",
                       "tstatus", "monitor gdbtrace status", "gdbtrace status"],
                      program="trace_loop", args=(400,))
        self.assertOutput(run, r"Trace stopped because the buffer was full\.")
        rows = status_rows(run.output)
        self.assertEqual(len(rows), 1, run.transcript())
        _, _, _, hits, frames, drops, after_stop, _ = rows[0]
        self.assertEqual(hits, 400, run.transcript())
        self.assertGreater(frames, 0, run.transcript())
        self.assertEqual(hits, frames + drops + (after_stop or 0), run.transcript())
        self.assertGreater(after_stop, 0, run.transcript())
        # The plugin shows the same identity from qGdbtrace.status.
        self.assertOutput(run, rf"^2\s+0x[0-9a-f]+\s+{backend}\s+{hits}\s+{frames}\s+{drops}\s+{after_stop}\s")

    def test_refused_large_collection_names_its_size(self):
        # gdb compiles this to bytecode ending in `trace` with a 1000000-byte constant size.
        require(self, "ebpf" in available_collectors(), "the eBPF collector is not available here", key="no-ebpf")
        run = run_gdb(["monitor gdbtrace backend auto", "trace probe_me", "actions",
                       "collect *(char*)$rsi@1000000", "end", "tstart",
                       "monitor gdbtrace status", "tstop"],  # console text waits for a qRcmd
                      program="trace_loop", args=(1,))
        self.assertOutput(run, r"tracepoint 1: .*ebpf: the eBPF collector cannot run this tracepoint: "
                               r"collecting 1000000 bytes in one hit \(trace\): an eBPF frame holds at "
                               r"most 262144 bytes.*; using ptrace")
        self.assertNoOutput(run, r"tracenz")
        self.assertOutput(run, r"tracepoint 1 at 0x[0-9a-f]+: backend ptrace,")


if __name__ == "__main__":
    unittest.main()
