"""gdbtrace plugin: `gdbtrace stats` (numbers checked against plugin_demo's known values, grouped
by tracepoint and by thread), `gdbtrace plot` (PNG when gdb's Python has matplotlib, else a clear
message), and bad arguments."""

import re
import subprocess
import unittest

from gdbtest import GDB
from test_plugin_export import (LINE_DONE, LINE_THREADS_DONE, LINE_WORK, RUN_TO_DONE, WORK_TRACEPOINT,
                                PluginTestCase, needs_gdbtrace, plugin_run)


def gdb_has_matplotlib():
    out = subprocess.run([GDB, "-nx", "-batch", "-ex", "python import matplotlib; print('MPL-OK')"],
                         capture_output=True, text=True, timeout=60)
    return "MPL-OK" in out.stdout


def table_row(output, label):
    """The numbers of one row of a stats table: count, min, max, mean, p50, p90, p99."""
    m = re.search(r"^%s\s+(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$" % re.escape(label), output,
                  re.MULTILINE)
    if not m:
        raise AssertionError("no stats row %r in:\n%s" % (label, output))
    return [int(m.group(1))] + [float(x) for x in m.groups()[1:]]


@needs_gdbtrace
class Stats(PluginTestCase):
    def test_summary_and_histogram(self):
        run = plugin_run(WORK_TRACEPOINT + RUN_TO_DONE + ["gdbtrace stats scaled", "gdbtrace stats g_sample.value",
                                                          "gdbtrace stats scaled + 1", "gdbtrace stats delay_us"])
        self.assertNoPythonErrors(run)
        # scaled = 3*i for i in 0..19: mean 28.5, p50 28.5, p90 51.3, p99 56.43 (linear interpolation)
        self.assertEqual(table_row(run.stdout, "all"), [20, 0, 57, 28.5, 28.5, 51.3, 56.43])
        rows = re.findall(r"^all\s+.*$", run.stdout, re.MULTILINE)
        self.assertEqual(len(rows), 4)
        self.assertEqual(table_row(rows[1], "all"), [20, 0, 9.5, 4.75, 4.75, 8.55, 9.405])
        self.assertEqual(table_row(rows[2], "all"), [20, 1, 58, 29.5, 29.5, 52.3, 57.43])
        self.assertEqual(table_row(rows[3], "all"), [20, 100, 100, 100, 100, 100, 100])
        self.assertOutput(run, r"Statistics of scaled over 20 frames")
        bars = re.findall(r"^ *\[[^\]\n]+[)\]] \| (\d+) #+$", run.stdout.split("Histogram of scaled:")[1].split(
            "Statistics")[0], re.MULTILINE)
        self.assertEqual(sum(int(b) for b in bars), 20)

    def test_by_tracepoint(self):
        # tracepoint 1 at tp-work (every call), tracepoint 2 at the entry of work, both collecting i
        run = plugin_run(["trace plugin_demo.c:%d" % LINE_WORK, "actions", "collect i", "end",
                          "trace work", "actions", "collect i, $trace_timestamp", "end"] + RUN_TO_DONE +
                         ["gdbtrace stats i by tracepoint"], args=(12, 50))
        self.assertNoPythonErrors(run)
        out = run.stdout
        self.assertEqual(table_row(out, "tp 1 work (plugin_demo.c:%d)" % LINE_WORK)[:3], [12, 0, 11])
        tp2 = re.search(r"^tp 2 work \(plugin_demo\.c:\d+\)", out, re.MULTILINE).group(0)
        self.assertEqual(table_row(out, tp2)[:3], [12, 0, 11])
        self.assertEqual(table_row(out, "all")[:3], [24, 0, 11])

    def test_by_thread(self):
        # 3 threads; thread t calls work(t*1000 + k) for k < 4
        run = plugin_run(["trace plugin_demo.c:%d" % LINE_WORK, "actions", "collect i, $regs", "end",
                          "break plugin_demo.c:%d" % LINE_THREADS_DONE, "tstart", "continue", "tstop",
                          "gdbtrace stats i by thread"], args=("threads", 3, 4, 200))
        self.assertNoPythonErrors(run)
        rows = re.findall(r"^(thread .*?|plugin_demo\S*)\s+4\s+(\d+)\s+(\d+)\s", run.stdout, re.MULTILINE)
        self.assertEqual(sorted((int(lo), int(hi)) for _label, lo, hi in rows), [(0, 3), (1000, 1003), (2000, 2003)],
                         run.transcript())
        self.assertEqual(table_row(run.stdout, "all")[:3], [12, 0, 2003])

    def test_bad_arguments(self):
        run = plugin_run(WORK_TRACEPOINT + RUN_TO_DONE + [
            "gdbtrace stats", "gdbtrace stats i by colour", "gdbtrace stats g_sample", "gdbtrace stats g_sample.tag",
            "gdbtrace stats g_total", "gdbtrace stats no_such_thing", "gdbtrace plot i", "gdbtrace plot i out.txt"])
        self.assertNoPythonErrors(run)
        self.assertOrdered(run, [r"usage: gdbtrace stats EXPR \[by tracepoint\|thread\]",
                                 r"group by `tracepoint` or `thread`",
                                 r"`g_sample` is not a scalar \(3 members: g_sample\.id, g_sample\.value",
                                 r"`g_sample\.tag` is not numeric",
                                 r"no trace frame holds a value of `g_total`",
                                 r"no trace frame holds a value of `no_such_thing`.*No symbol",
                                 r"usage: gdbtrace plot EXPR FILE\.png",
                                 r"usage: gdbtrace plot EXPR FILE\.png"])


@needs_gdbtrace
class Plot(PluginTestCase):
    def test_png(self):
        png = self.dir / "scaled.png"
        run = plugin_run(WORK_TRACEPOINT + RUN_TO_DONE + ["gdbtrace plot scaled %s" % png])
        self.assertNoPythonErrors(run)
        if gdb_has_matplotlib():
            self.assertOutput(run, r"Wrote .*scaled\.png \(20 frames; x axis: time")
            data = png.read_bytes()
            self.assertTrue(data.startswith(b"\x89PNG\r\n\x1a\n"))
            self.assertGreater(len(data), 5000)
        else:
            self.assertOutput(run, r"gdbtrace plot needs matplotlib")
            self.assertFalse(png.exists())


if __name__ == "__main__":
    unittest.main()
