"""gdbtrace plugin end to end: the real gdb 13 with gdb-plugin/gdbtrace.py sourced, driving
gdbtrace-server; `gdbtrace status` and `gdbtrace export` (perfetto, csv, jsonl, tfile) of frames
whose values are known (tests/programs/plugin_demo.c: at tp-work, scaled == 3*i,
g_sample = {i, i*0.5, "s<i>"}, delay_us == the delay argument). Also the shared helpers of the
other test_plugin_* files."""

import csv
import json
import os
import re
import tempfile
import unittest
from pathlib import Path

from gdbtest import GdbTestCase, Server, available_collectors, is_stock_gdbserver, program, require, run_gdb

REPO = Path(__file__).resolve().parents[2]
PLUGIN = REPO / "gdb-plugin" / "gdbtrace.py"
SOURCE = REPO / "tests" / "programs" / "plugin_demo.c"


def line_of(marker):
    for number, text in enumerate(SOURCE.read_text().splitlines(), 1):
        if marker in text:
            return number
    raise AssertionError("marker %r not in %s" % (marker, SOURCE))


LINE_WORK = line_of("/* tp-work */")
LINE_DONE = line_of("/* bp-done */")
LINE_THREADS_DONE = line_of("/* bp-threads-done */")

# Tracepoint 1 at tp-work; the run ends at bp-done with the process alive.
WORK_TRACEPOINT = ["trace plugin_demo.c:%d" % LINE_WORK, "actions",
                   "collect scaled, i, g_sample, delay_us, $rsp", "collect $trace_timestamp", "end"]
RUN_TO_DONE = ["break plugin_demo.c:%d" % LINE_DONE, "tstart", "continue", "tstop"]
# The same, with `gdbtrace status` while the run is still on (collectors attached).
RUN_TO_DONE_STATUS = RUN_TO_DONE[:3] + ["gdbtrace status"] + RUN_TO_DONE[3:]

needs_gdbtrace = unittest.skipIf(is_stock_gdbserver(), "needs gdbtrace-server (qGdbtrace packets)")


def plugin_run(commands, args=(20, 100), **kw):
    """gdb with the plugin sourced, against a fresh stub running plugin_demo ARGS."""
    return run_gdb(["source %s" % PLUGIN] + list(commands), program="plugin_demo", args=args, **kw)


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


class PluginTestCase(GdbTestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="gdbtrace-plugin-")
        self.dir = Path(self.tmp.name)

    def tearDown(self):
        self.tmp.cleanup()

    def assertNoPythonErrors(self, run):
        self.assertNoOutput(run, r"Python Exception|Traceback|Error occurred in Python",
                            "the plugin raised instead of reporting")


@needs_gdbtrace
class Export(PluginTestCase):
    def test_all_formats_hold_the_known_values(self):
        files = {fmt: self.dir / ("out." + fmt) for fmt in ("csv", "jsonl", "json", "tf")}
        run = plugin_run(WORK_TRACEPOINT + RUN_TO_DONE_STATUS + [
            "gdbtrace status",
            "gdbtrace export csv %s" % files["csv"],
            "gdbtrace export jsonl %s" % files["jsonl"],
            "gdbtrace export perfetto %s" % files["json"],
            "gdbtrace export tfile %s" % files["tf"]])
        self.assertNoPythonErrors(run)
        self.assertOrdered(run, [r"Trace run: running",
                                 r"Buffer: .* 20 frames",
                                 r"^tp\s+address\s+backend\s+hits\s+frames\s+drops\s+after stop\s+errors\s+bytes$",
                                 r"^1\s+0x[0-9a-f]+\s+(ebpf|ptrace|module)\s+20\s+20\s+0\s+0",
                                 r"Trace run: stopped \(tstop\)",
                                 r"Exported 20 frames to .*out\.csv \(csv\)",
                                 r"ts = \$trace_timestamp"])

        rows = read_csv(files["csv"])
        self.assertEqual(len(rows), 20, "one CSV row per frame")
        self.assertEqual(list(rows[0])[:4], ["frame", "tracepoint", "ts_us", "thread"])
        for n, row in enumerate(rows):
            self.assertEqual(int(row["frame"]), n)
            self.assertEqual(int(row["tracepoint"]), 1)
            self.assertEqual(int(row["i"]), n)
            self.assertEqual(int(row["scaled"]), 3 * n)
            self.assertEqual(int(row["g_sample.id"]), n)
            self.assertEqual(float(row["g_sample.value"]), n * 0.5)
            self.assertEqual(row["g_sample.tag"], "s%d" % n)
            self.assertEqual(int(row["delay_us"]), 100)
            self.assertRegex(row["$rsp"], r"^0x7ff[0-9a-f]+$")
            self.assertEqual(row["ts_us"], row["$trace_timestamp"])
        stamps = [int(r["ts_us"]) for r in rows]
        self.assertEqual(stamps, sorted(stamps))
        self.assertGreaterEqual(stamps[-1] - stamps[0], 19 * 100, "19 busy waits of 100 us in between")

        lines = [json.loads(line) for line in files["jsonl"].read_text().splitlines()]
        self.assertEqual(len(lines), 20)
        self.assertEqual(lines[7]["values"]["scaled"], 21)
        self.assertEqual(lines[7]["values"]["g_sample.tag"], "s7")
        self.assertEqual(lines[7]["ts_us"], stamps[7])

        doc = json.loads(files["json"].read_text())
        events = [e for e in doc["traceEvents"] if e["ph"] != "M"]
        self.assertEqual(len(events), 20)
        for n, e in enumerate(events):
            for key in ("name", "ph", "ts", "pid", "tid", "args"):
                self.assertIn(key, e)
            self.assertEqual(e["ph"], "i")
            self.assertEqual(e["ts"], stamps[n])
            self.assertEqual(e["args"]["i"], n)
            self.assertEqual(e["args"]["frame"], n)
            self.assertGreater(e["pid"], 1)
        self.assertRegex(events[0]["name"], r"^tp 1 work \(plugin_demo\.c:%d\)$" % LINE_WORK)

        # The exported tfile reads back in gdb like one `tsave` wrote (the PIE loaded where it ran).
        runtime = int(re.search(r"Tracepoint 1 at (0x[0-9a-f]+)", run.stdout).group(1), 16)
        static = run_gdb(["info line plugin_demo.c:%d" % LINE_WORK], program="plugin_demo", connect=False)
        offset = runtime - int(re.search(r"starts at address (0x[0-9a-f]+)", static.stdout).group(1), 16)
        back = run_gdb(["symbol-file -o 0x%x %s" % (offset, program("plugin_demo")), "target tfile %s" % files["tf"],
                        "tstatus", "tfind 5", "print scaled", "print g_sample", "tfind 19", "print i"],
                       connect=False)
        self.assertOrdered(back, [r"Collected 20 trace frames", r"Found trace frame 5",
                                  r"\$1 = 15", r"\$2 = \{id = 5, value = 2\.5, tag = \"s5",
                                  r"Found trace frame 19", r"\$3 = 19"])

    def test_exported_tfile_keeps_uncollected_registers_unavailable(self):
        # eBPF frames hold no x87/SSE state: live those registers are <unavailable>, and the exported
        # file (the stub's own writer when it runs on this host) must not turn them into 0.
        require(self, "ebpf" in available_collectors(), "the eBPF collector is not available here", key="no-ebpf")
        tf = self.dir / "regs.tf"
        run = plugin_run(["monitor gdbtrace backend ebpf"] + WORK_TRACEPOINT + RUN_TO_DONE +
                         ["tfind 3", "print $xmm0", "print $rsp != 0", "tfind none",
                          "gdbtrace export tfile %s" % tf])
        self.assertNoPythonErrors(run)
        self.assertOrdered(run, [r"^\$1 = <unavailable>$", r"^\$2 = 1$",
                                 r"Exported 20 frames to .*regs\.tf \(tfile\)"])
        self.assertNoOutput(run, r"runs on another host")
        back = run_gdb(["target tfile %s" % tf, "tstatus", "tfind 3", "print $xmm0", "print $st0",
                        "print $rsp != 0"], connect=False)
        self.assertOrdered(back, [r"Collected 20 trace frames", r"Found trace frame 3",
                                  r"^\$1 = <unavailable>$", r"^\$2 = <unavailable>$", r"^\$3 = 1$"])

    def test_values_agree_with_gdb_tfind(self):
        out = self.dir / "frames.csv"
        checks = []
        for frame in (0, 7, 19):
            checks += ["tfind %d" % frame, "print i", "print scaled", "print g_sample.value", "print $rsp"]
        run = plugin_run(WORK_TRACEPOINT + RUN_TO_DONE + ["gdbtrace export csv %s" % out] + checks + ["tfind none"])
        self.assertNoPythonErrors(run)
        rows = read_csv(out)
        printed = re.findall(r"^\$\d+ = (.*)$", run.stdout, re.MULTILINE)
        self.assertEqual(len(printed), 12, run.transcript())
        for k, frame in enumerate((0, 7, 19)):
            i, scaled, value, rsp = printed[4 * k: 4 * k + 4]
            self.assertEqual(rows[frame]["i"], i)
            self.assertEqual(rows[frame]["scaled"], scaled)
            self.assertEqual(float(rows[frame]["g_sample.value"]), float(value))
            self.assertEqual(int(rows[frame]["$rsp"], 16), int(rsp.split()[-1], 16))

    def test_batch_and_general_decoding_agree(self):
        """The batch decoder (layouts, one %-template per run) and the general one (`-slow`: bytecode
        and Python per frame) write byte-identical files in every format, for a buffer of mixed types
        (char arrays are written row by row) and one of scalars only (written by the templates)."""
        buffers = {
            # locals (register-relative), ints, a struct with a double and a char array, a memory range
            # (`@`: an array of shorts), $regs (pointers; the thread), $trace_timestamp
            "mixed": ["collect scaled, i, g_sample, delay_us, *(short *)&g_total@4",
                      "collect $regs, $trace_timestamp"],
            "scalar": ["collect scaled, i, g_sample.id, g_sample.value, *(int *)&g_sample@2, $regs",
                       "collect $trace_timestamp"],
        }
        for name, actions in buffers.items():
            with self.subTest(buffer=name):
                commands = ["trace plugin_demo.c:%d" % LINE_WORK, "actions"] + actions + ["end"] + RUN_TO_DONE
                pairs = []
                for fmt, ext in (("csv", "csv"), ("jsonl", "jsonl"), ("perfetto", "json")):
                    fast, slow = self.dir / ("%s-fast.%s" % (name, ext)), self.dir / ("%s-slow.%s" % (name, ext))
                    commands += ["gdbtrace export %s %s" % (fmt, fast), "gdbtrace export %s -slow %s" % (fmt, slow)]
                    pairs.append((fast, slow))
                commands.append("python from gdbtrace_plugin import session; d = session.TraceData(); "
                                "runs = list(d.runs()); print('decoded %d frames, %d in runs, %d clean; kinds %s' % ("
                                "sum(map(len, runs)), d.runner.frames_fast, sum(len(r) for r in runs if r.clean), "
                                "','.join(sorted({l.kind for r in runs for l in r.plan.leaves}))))")
                run = plugin_run(commands)
                self.assertNoPythonErrors(run)
                m = re.search(r"decoded (\d+) frames, (\d+) in runs, (\d+) clean; kinds (\S+)", run.stdout)
                self.assertIsNotNone(m, run.transcript())
                self.assertEqual(int(m.group(1)), 20)
                self.assertGreaterEqual(int(m.group(2)), 19, "all but the first frame decoded in runs")
                if name == "scalar":  # scalars only and all present: the runs go through the templates
                    self.assertEqual((int(m.group(3)), m.group(4)), (int(m.group(2)), "float,int,ptr"))
                for fast, slow in pairs:
                    self.assertEqual(fast.read_text(), slow.read_text(), fast.name)
                rows = read_csv(pairs[0][0])
                self.assertEqual(len(rows), 20)
                self.assertRegex(rows[0]["thread"], r"^\d+$", "registers collected: the thread is known")
                self.assertEqual(float(rows[4]["g_sample.value"]), 2.0)
                member = "*(short *)&g_total@4[3]" if name == "mixed" else "*(int *)&g_sample@2[0]"
                self.assertIn(member, rows[0], "the memory range is an array of columns")
                if name == "scalar":
                    self.assertEqual(int(rows[9]["*(int *)&g_sample@2[0]"]), 9, "g_sample.id")

    def test_tracepoint_without_timestamp_uses_frame_order(self):
        out = self.dir / "order.csv"
        perfetto = self.dir / "order.json"
        run = plugin_run(["trace plugin_demo.c:%d" % LINE_WORK, "actions", "collect i", "end"] + RUN_TO_DONE +
                         ["gdbtrace export csv %s" % out, "gdbtrace export perfetto %s" % perfetto])
        self.assertOutput(run, r"ts = frame index")
        rows = read_csv(out)
        self.assertEqual([int(r["order"]) for r in rows], list(range(20)))
        doc = json.loads(perfetto.read_text())
        self.assertIn("frame index", doc["otherData"]["timestamps"])
        self.assertEqual([e["ts"] for e in doc["traceEvents"] if e["ph"] == "i"], list(range(20)))

    def test_bad_arguments(self):
        run = plugin_run(WORK_TRACEPOINT + RUN_TO_DONE + [
            "gdbtrace export", "gdbtrace export xml %s" % (self.dir / "x"),
            "gdbtrace export csv %s" % (self.dir / "no" / "such" / "dir.csv"),
            "gdbtrace status extra"])
        self.assertNoPythonErrors(run)
        self.assertOrdered(run, [r"usage: gdbtrace export FORMAT FILE",
                                 r"unknown format `xml` \(choose perfetto, csv, jsonl, tfile\)",
                                 r"directory .*no/such does not exist",
                                 r"usage: gdbtrace status"])


@needs_gdbtrace
class OpenPieTraceFile(PluginTestCase):
    """plugin_demo is a PIE (Debian's default). gdb's `target tfile` reads a trace file at the
    program's link-time addresses, so a plain `target tfile` of its trace decodes nothing; `gdbtrace
    open` moves the symbols to where the trace found the program, for gdb's own tfind and print and
    for every plugin command."""

    def test_open_relocates_a_pie_program(self):
        tf = self.dir / "pie.tf"
        out_plain, out_open = self.dir / "plain.csv", self.dir / "open.csv"
        live = plugin_run(WORK_TRACEPOINT + RUN_TO_DONE + ["tsave %s" % tf])
        self.assertTrue(tf.exists(), live.transcript())
        plain = run_gdb(["source %s" % PLUGIN, "target tfile %s" % tf, "tfind 7", "print i",
                         "gdbtrace export csv %s" % out_plain], program="plugin_demo", connect=False)
        self.assertNoPythonErrors(plain)
        self.assertOutput(plain, r'No symbol "i" in current context')
        self.assertOutput(plain, r"position-independent and gdb's `target tfile` does not relocate it; "
                                 r"open the file with `gdbtrace open")
        opened = run_gdb(["source %s" % PLUGIN, "gdbtrace open %s" % tf, "tfind 7", "print i",
                          "print scaled", "gdbtrace export csv %s" % out_open],
                         program="plugin_demo", connect=False)
        self.assertNoPythonErrors(opened)
        self.assertOrdered(opened, [r"position-independent: its symbols are moved to 0x[0-9a-f]+000, where the "
                                    r"trace found it", r"Found trace frame 7", r"^\$1 = 7$", r"^\$2 = 21$",
                                    r"Exported 20 frames"])
        self.assertNoOutput(opened, r"cannot decode")
        rows = read_csv(out_open)
        self.assertEqual([int(r["i"]) for r in rows], list(range(20)))
        self.assertEqual([int(r["scaled"]) for r in rows], [3 * i for i in range(20)])

    def test_open_refuses_what_is_not_a_trace_file(self):
        bogus = self.dir / "not-a-trace"
        bogus.write_text("hello\n")
        run = run_gdb(["source %s" % PLUGIN, "gdbtrace open %s" % bogus, "gdbtrace open"],
                      program="plugin_demo", connect=False)
        self.assertNoPythonErrors(run)
        self.assertOrdered(run, [r"gdbtrace open: .*not-a-trace is not a gdb trace file",
                                 r"usage: gdbtrace open FILE"])


class I386Frames(PluginTestCase):
    def test_jsonl_of_an_i386_program(self):
        """A gcc -m32 program's frames have the i386 'R' layout (eax..eip, 4 bytes each): the plugin
        reads them through the stub's target description, never with x86-64 offsets."""
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "m32.jsonl")
            run = run_gdb(["source %s" % PLUGIN, "break main", "continue", "break loop_done",
                           "trace traced_point", "actions", "collect $regs, i", "end", "tstart",
                           "continue", "tstop", "info address traced_point", f"gdbtrace export jsonl {out}"],
                          program="m32_demo", args=("loop",))
            self.assertOutput(run, r"Exported 5 frames")
            site = re.search(r'Symbol "traced_point" is a function at address (0x[0-9a-f]+)', run.output)
            self.assertIsNotNone(site, run.transcript())
            with open(out) as f:
                rows = [json.loads(line)["values"] for line in f]
        self.assertEqual([r["i"] for r in rows], [0, 1, 2, 3, 4], rows)
        self.assertNotIn("$rax", rows[0])
        number = lambda v: v if isinstance(v, int) else int(v, 16)  # noqa: E731 (pointers are hex text)
        eip = {number(r["$eip"]) for r in rows}
        self.assertEqual(len(eip), 1, rows)
        self.assertGreaterEqual(eip.pop(), int(site.group(1), 16))  # after traced_point's prologue
        self.assertTrue(all(0xF0000000 <= number(r["$esp"]) <= 0xFFFFFFFF for r in rows), rows)


class WithoutGdbtrace(PluginTestCase):
    def test_stock_gdbserver_is_a_clear_error(self):
        with Server("once", program=program("plugin_demo"), args=(5, 10), binary="/usr/bin/gdbserver") as srv:
            run = run_gdb(["source %s" % PLUGIN] + WORK_TRACEPOINT + RUN_TO_DONE + [
                "gdbtrace status", "gdbtrace export csv %s" % (self.dir / "x.csv"), "gdbtrace stats i",
                "gdbtrace live"], program="plugin_demo", server=srv)
        self.assertNoPythonErrors(run)
        self.assertEqual(len(re.findall(r"does not answer qGdbtrace\.\* packets", run.output)), 4,
                         run.transcript())
        self.assertFalse((self.dir / "x.csv").exists())

    def test_not_connected(self):
        run = run_gdb(["source %s" % PLUGIN, "help gdbtrace", "gdbtrace status", "gdbtrace export csv x.csv"],
                      program="plugin_demo", connect=False)
        self.assertNoPythonErrors(run)
        self.assertOrdered(run, [r"gdbtrace export -- ", r"gdbtrace latency -- ", r"gdbtrace live -- ",
                                 r"gdbtrace plot -- ", r"gdbtrace stats -- ", r"gdbtrace status -- ",
                                 r"not connected to a target", r"not connected to a target"])


if __name__ == "__main__":
    unittest.main()
