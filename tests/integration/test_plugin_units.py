"""Unit tests of the gdbtrace plugin's pure-Python parts (no gdb, no stub): frame-stream
parsing, agent-expression evaluation over frames, statistics, exporters, latency pairing,
`info tracepoints` parsing, and the packet layer with a mocked connection."""

import binascii
import csv
import io
import json
import math
import os
import struct
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "gdb-plugin"))

from gdbtrace_plugin import (ax, batch, exporters, frames, latency, model, regs, relocate, stats,  # noqa: E402
                             tracepoints, transport)


def regblock(**values):
    """A 816-byte 'R' block with the named 8-byte registers set."""
    block = bytearray(regs.REGBLOCK_SIZE_AVX)
    for name, v in values.items():
        n = regs.NUMBER[name]
        struct.pack_into("<Q", block, regs.OFFSETS[n], v & ((1 << 64) - 1))
    return bytes(block)


# gdb 13's `maint agent-eval -at plugin_demo.c:41, &scaled` (a local at DW_OP_fbreg -20, CFA = rbp + 16)
LOCAL_ADDRESS = """Scope: 0x122c
Reg mask: 40
  0  reg 6
  3  const8 16
  5  add
  6  const8 236
  8  ext 8
 10  add
"""  # the local's address: rbp + 16 - 20
LISTING_LOCAL = LOCAL_ADDRESS + """ 11  end
"""
# `scaled + 1`: reads the local's memory
LISTING_VALUE = LOCAL_ADDRESS + """ 11  ref32
 12  ext 32
 14  const8 1
 16  add
 17  ext 32
 19  end
"""
LISTING_GLOBAL = """Scope: 0x122c
Reg mask: 00
  0  const16 16480
  3  const8 16
  5  add
  6  end
"""


class FrameStreamTest(unittest.TestCase):
    def sample_stream(self):
        f0 = frames.build_frame(1, regs=regblock(rbp=0x7ffc0000, rsp=0x7ffbffe0, rip=0x401000),
                                mem=[(0x7ffbfffc, struct.pack("<i", -7)), (0x404060, b"abcd")],
                                tsv=[(1, 123456)])
        f1 = frames.build_frame(2, mem=[(0x1000, b"\x01\x02"), (0x1002, b"\x03\x04")])
        f2 = frames.build_frame(1)
        return f0 + f1 + f2

    def test_round_trip(self):
        got = frames.parse_stream(self.sample_stream(), regs.REGBLOCK_SIZE_AVX)
        self.assertEqual([f.tp for f in got], [1, 2, 1])
        self.assertEqual([f.index for f in got], [0, 1, 2])
        self.assertEqual(regs.read_int(got[0].regs, regs.RBP), 0x7ffc0000)
        self.assertEqual(got[0].tsv, {1: 123456})
        self.assertEqual(got[0].read(0x404061, 2), b"bc")
        self.assertIsNone(got[0].read(0x404062, 4), "partly outside the block")
        self.assertEqual(got[1].read(0x1001, 2), b"\x02\x03", "spans adjacent blocks")
        self.assertIsNone(got[2].regs)
        self.assertEqual(got[2].mem, [])

    def test_chunked_at_every_split(self):
        stream = self.sample_stream()
        whole = [(f.tp, f.regs, f.mem, f.tsv) for f in frames.parse_stream(stream, regs.REGBLOCK_SIZE_AVX)]
        for cut in range(1, len(stream), 7):
            parser = frames.FrameParser(regs.REGBLOCK_SIZE_AVX)
            got = parser.feed(stream[:cut]) + parser.feed(stream[cut:])
            self.assertEqual([(f.tp, f.regs, f.mem, f.tsv) for f in got], whole, "cut at %d" % cut)
            self.assertEqual(parser.pending_bytes, 0)

    def test_malformed(self):
        bad_kind = struct.pack("<HI", 1, 2) + b"Zx"
        with self.assertRaises(frames.FrameFormatError):
            frames.parse_stream(bad_kind, 560)
        short_regs = struct.pack("<HI", 1, 11) + b"R" + bytes(10)
        with self.assertRaises(frames.FrameFormatError):
            frames.parse_stream(short_regs, 560)
        with self.assertRaises(frames.FrameFormatError):
            frames.parse_stream(frames.build_frame(1, mem=[(0, b"xy")])[:-1], 560)

    def test_register_layout(self):
        self.assertEqual(regs.OFFSETS[regs.RIP], 128)
        self.assertEqual(regs.OFFSETS[regs.FS_BASE], 544)
        self.assertEqual(regs.OFFSETS[60], 560)


class AgentExpressionTest(unittest.TestCase):
    def frame(self, **kw):
        f = frames.parse_stream(frames.build_frame(1, **kw), regs.REGBLOCK_SIZE_AVX)
        return f[0]

    def test_local_address_closed_form(self):
        prog = ax.Program(ax.parse_listing(LISTING_LOCAL))
        self.assertEqual((prog.kind, prog.regno, prog.const), ("reg", regs.RBP, (16 - 20) & ax.MASK64))
        f = self.frame(regs=regblock(rbp=0x7ffc0010))
        self.assertEqual(prog.run(f), 0x7ffc000c)
        self.assertEqual(ax.evaluate(prog.ops, f), 0x7ffc000c, "interpreter agrees with the closed form")

    def test_global_address(self):
        prog = ax.Program(ax.parse_listing(LISTING_GLOBAL))
        self.assertEqual(prog.kind, "const")
        self.assertEqual(prog.run(self.frame()), 16496)

    def test_value_reads_memory(self):
        ops = ax.parse_listing(LISTING_VALUE)
        self.assertEqual(ax.Program(ops).kind, "general")
        f = self.frame(regs=regblock(rbp=0x1010), mem=[(0x100c, struct.pack("<i", -5))])
        self.assertEqual(ax._signed(ax.evaluate(ops, f)), -4)
        with self.assertRaises(ax.Unavailable):
            ax.evaluate(ops, self.frame(regs=regblock(rbp=0x1010)))
        with self.assertRaises(ax.Unavailable):
            ax.Program(ax.parse_listing(LISTING_LOCAL)).run(self.frame())

    def test_tsv_branches_and_errors(self):
        text = "\n".join(["  0  getv 1", "  3  dup", "  4  const8 10", "  6  less_signed", "  7  if_goto 13",
                          " 10  const8 99", " 12  end", " 13  const8 7", " 15  end"])
        ops = ax.parse_listing(text)
        self.assertEqual(ax.evaluate(ops, self.frame(tsv=[(1, 3)])), 7)
        self.assertEqual(ax.evaluate(ops, self.frame(tsv=[(1, 30)])), 99)
        with self.assertRaises(ax.Unavailable):
            ax.evaluate(ops, self.frame())
        with self.assertRaises(ax.AxError):
            ax.parse_listing("  0  const8 1\n")
        with self.assertRaises(ax.AxError):
            ax.evaluate(ax.parse_listing("  0  float\n  1  end"), self.frame())
        div0 = ax.parse_listing("  0  const8 1\n  2  const8 0\n  4  div_signed\n  5  end")
        with self.assertRaises(ax.Unavailable):
            ax.evaluate(div0, self.frame())
        sdiv = ax.parse_listing("  0  const8 249\n  2  ext 8\n  4  const8 2\n  6  div_signed\n  7  end")
        self.assertEqual(ax._signed(ax.evaluate(sdiv, self.frame())), -3)


class FrameCounterTest(unittest.TestCase):
    def test_counts_across_chunks(self):
        stream = b"".join(frames.build_frame(1, mem=[(i, bytes(i % 5))]) for i in range(30)) + b"\x01\x00\x09"
        for size in (1, 5, 6, 7, 64, len(stream)):
            c = frames.FrameCounter()
            for off in range(0, len(stream), size):
                c.feed(stream[off:off + size])
            self.assertEqual(c.frames, 30)
            self.assertEqual(c.complete_bytes, len(stream) - 3)

    def test_runs_of_one_header(self):
        # long runs of equal headers (stepped over by one match), empty frames, a change of size
        stream = b"".join([frames.build_frame(2, tsv=[(1, i)]) for i in range(500)] + [frames.build_frame(2)] * 3 +
                          [frames.build_frame(2, mem=[(0x1000, b"ab")])] * 200 + [frames.build_frame(3, tsv=[(1, 0)])])
        for size in (1, 6, 19, 4096, len(stream)):
            c = frames.FrameCounter()
            for off in range(0, len(stream), size):
                c.feed(stream[off:off + size])
            self.assertEqual((c.frames, c.complete_bytes), (704, len(stream)), "chunks of %d" % size)


class StatsTest(unittest.TestCase):
    def test_summary(self):
        s = stats.Summary(list(range(1, 101)))
        self.assertEqual((s.count, s.min, s.max), (100, 1, 100))
        self.assertAlmostEqual(s.mean, 50.5)
        self.assertAlmostEqual(s.p50, 50.5)
        self.assertAlmostEqual(s.p90, 90.1)
        self.assertAlmostEqual(s.p99, 99.01)
        one = stats.Summary([4.5])
        self.assertEqual((one.p50, one.p99), (4.5, 4.5))
        with self.assertRaises(ValueError):
            stats.Summary([])

    def test_histogram(self):
        values = [1, 2, 2, 3, 3, 3]
        bins = stats.histogram_bins(values, bins=10)
        self.assertEqual([(lo, c) for lo, _hi, c in bins], [(1, 1), (2, 2), (3, 3)])
        floats = [i / 10 for i in range(100)]
        bins = stats.histogram_bins(floats, bins=10)
        self.assertEqual(sum(c for _, _, c in bins), 100)
        self.assertEqual(len(bins), 10)
        text = stats.ascii_histogram(values)
        self.assertEqual(len(text.splitlines()), 3)
        self.assertIn("###", text)
        table = stats.summary_table([("all", stats.Summary(values))])
        self.assertIn("count", table)
        self.assertIn(" 6 ", table)


def leaf(name, kind, fmt=None, offset=0, size=8, enum_names=None):
    return model.Leaf(name, offset, size, kind, fmt, None, enum_names)


def program(text):
    return ax.Program(ax.parse_listing(text))


def plan_a():
    """tp 1: x (int, global at 0x404060), s.v (double member at +8), tag (char[8] at +16), $rsp."""
    s_col = model.Column("s", "mem", program("  0  const32 4210800\n  5  end"), 24,
                         [leaf("s.v", "float", "<d", 8), leaf("tag", "str", None, 16, 8)])
    x_col = model.Column("x", "mem", program("  0  const32 4210784\n  5  end"), 4, [leaf("x", "int", "<i", 0, 4)])
    rsp = model.Column("$rsp", "value", ax.Program([ax.Op(0, "reg", 7), ax.Op(3, "end", None)]), 8,
                       [leaf("$rsp", "ptr", "<Q")])
    return model.Plan(1, 0x401000, [x_col, s_col, rsp], [], "tp 1 f (a.c:3)")


def plan_b():
    y = model.Column("y", "mem", program("  0  const32 4210784\n  5  end"), 4, [leaf("y", "int", "<i", 0, 4)])
    return model.Plan(2, 0x402000, [y], [], "tp 2 g (a.c:9)")


def sample_runs():
    a, b = plan_a(), plan_b()
    return [
        batch.Run(a, [(0, 1000, 11, 1, 0.5, "s0", 0x7ffc0000)], True, True),
        batch.Run(b, [(1, 1005, 12, -3)], True, True),
        batch.Run(a, [(2, 1010, 11, 2, float("nan"), 'q"uote', None)], False, True),
    ]


class ExportersTest(unittest.TestCase):
    meta = {"timestamps": "trace_timestamp", "timestamps_note": "ts = $trace_timestamp", "pid": 42,
            "program": "demo", "thread_names": {11: "main"}}

    def test_jsonl(self):
        out = io.StringIO()
        self.assertEqual(exporters.export_runs(exporters.JsonlExporter(out, self.meta), sample_runs()), 3)
        rows = [json.loads(line) for line in out.getvalue().splitlines()]
        self.assertEqual(rows[0], {"frame": 0, "tracepoint": 1, "ts_us": 1000, "thread": 11,
                                   "values": {"x": 1, "s.v": 0.5, "tag": "s0", "$rsp": "0x7ffc0000"}})
        self.assertEqual(rows[1]["values"], {"y": -3})
        self.assertEqual(rows[2]["values"], {"x": 2, "s.v": "nan", "tag": 'q"uote'})

    def test_csv(self):
        out = io.StringIO()
        exporter = exporters.CsvExporter(out, self.meta, ["x", "s.v", "tag", "$rsp", "y"])
        self.assertEqual(exporters.export_runs(exporter, sample_runs()), 3)
        rows = list(csv.reader(io.StringIO(out.getvalue())))
        self.assertEqual(rows[0], ["frame", "tracepoint", "ts_us", "thread", "x", "s.v", "tag", "$rsp", "y"])
        self.assertEqual(len(rows) - 1, 3, "one row per frame")
        self.assertEqual(rows[1], ["0", "1", "1000", "11", "1", "0.5", "s0", "0x7ffc0000", ""])
        self.assertEqual(rows[2], ["1", "2", "1005", "12", "", "", "", "", "-3"])
        self.assertEqual(rows[3][6], 'q"uote')

    def test_templates_match_row_by_row_output(self):
        """The per-plan templates (fast) and write_row (general) print the same text."""
        numeric = model.Plan(3, 0x403000, [
            model.Column("n", "mem", program("  0  const32 4210784\n  5  end"), 8, [leaf("n", "int", "<q")]),
            model.Column("p", "mem", program("  0  const32 4210792\n  5  end"), 8, [leaf("p", "ptr", "<Q")]),
            model.Column("d", "mem", program("  0  const32 4210800\n  5  end"), 8, [leaf("d", "float", "<d")]),
        ], [], "tp 3 h (b.c:1)")
        rows = [(i, 5000 + i, 77 if i % 2 else 78, -i, 0x1000 + i, i / 3.0) for i in range(5)]
        for has_tid in (True, False):
            rs = rows if has_tid else [r[:2] + (None,) + r[3:] for r in rows]
            for make in (lambda o: exporters.CsvExporter(o, self.meta, ["n", "p", "d"]),
                         lambda o: exporters.JsonlExporter(o, self.meta),
                         lambda o: exporters.PerfettoExporter(o, self.meta)):
                fast, slow = io.StringIO(), io.StringIO()
                exporters.export_runs(make(fast), [batch.Run(numeric, rs, True, has_tid)])
                exporters.export_runs(make(slow), [batch.Run(numeric, rs, False, has_tid)])
                if fast.getvalue().startswith('{"displayTimeUnit"'):
                    # trace-event JSON: same events; thread metadata may come earlier on the fast path
                    f, s = json.loads(fast.getvalue()), json.loads(slow.getvalue())
                    key = lambda e: json.dumps(e, sort_keys=True)
                    self.assertEqual(sorted(map(key, f["traceEvents"])), sorted(map(key, s["traceEvents"])))
                    self.assertEqual([e for e in f["traceEvents"] if e["ph"] != "M"],
                                     [e for e in s["traceEvents"] if e["ph"] != "M"])
                else:
                    self.assertEqual(fast.getvalue(), slow.getvalue())

    def test_perfetto(self):
        out = io.StringIO()
        self.assertEqual(exporters.export_runs(exporters.PerfettoExporter(out, self.meta), sample_runs()), 3)
        doc = json.loads(out.getvalue())
        events = [e for e in doc["traceEvents"] if e["ph"] != "M"]
        self.assertEqual(len(events), 3)
        for e in events:
            for key in ("name", "ph", "ts", "pid", "tid", "args"):
                self.assertIn(key, e)
            self.assertEqual(e["pid"], 42)
        self.assertEqual(events[0]["args"], {"frame": 0, "x": 1, "s.v": 0.5, "tag": "s0", "$rsp": "0x7ffc0000"})
        self.assertEqual(events[1]["tid"], 12)
        meta_names = {e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M"}
        self.assertIn("main", meta_names)
        self.assertIn("demo", meta_names)

    def test_json_value(self):
        self.assertEqual(exporters.json_value(math.inf), '"inf"')
        self.assertEqual(exporters.json_value(None), "null")
        self.assertEqual(exporters.json_value(True), "true")
        self.assertEqual(json.loads(exporters.json_value("a\nb")), "a\nb")


class BatchTest(unittest.TestCase):
    """Runs decoded through layouts (fast) equal frame-by-frame decoding (general)."""

    def local_plan(self):
        # `v` is a local at rbp-4 (int), `g` a global long at 0x404060, plus $trace_timestamp (tsv 1)
        v = model.Column("v", "mem", ax.Program(ax.parse_listing(LISTING_LOCAL)), 4, [leaf("v", "int", "<i", 0, 4)])
        g = model.Column("g", "mem", program("  0  const32 4210784\n  5  end"), 8, [leaf("g", "int", "<q")])
        ts = model.Column("$trace_timestamp", "value", program("  0  getv 1\n  3  end"), 8,
                          [leaf("$trace_timestamp", "int", "<q")])
        return model.Plan(1, 0x401000, [v, g, ts], [])

    def stream(self, n, rbp_of=lambda i: 0x7ffc1000):
        out = b""
        for i in range(n):
            rbp = rbp_of(i)
            out += frames.build_frame(1, regs=regblock(rbp=rbp, rip=0x401000, fs_base=0x7f00 + (i % 2)),
                                      mem=[(rbp + 16 - 20, struct.pack("<i", -i)), (0x404060, struct.pack("<q", 10 * i))],
                                      tsv=[(1, 5000 + i)])
        return out

    def run_all(self, stream, fast, chunk=1000):
        plan = self.local_plan()
        runner = batch.Runner(regs.REGBLOCK_SIZE_AVX, lambda f: plan, ts_tsv=1, by_time=True,
                              tid_for_fs=lambda fs: {0x7f00: 100, 0x7f01: 101}.get(fs), fast=fast)
        rows = []
        for off in range(0, len(stream), chunk):
            for run in runner.feed(stream[off:off + chunk]):
                rows += run.rows
        self.assertEqual(runner.pending_bytes, 0)
        return rows, runner

    def test_fast_equals_general(self):
        # rbp changes every 7 frames: the locals move, the layout check must follow them
        stream = self.stream(40, rbp_of=lambda i: 0x7ffc1000 + 0x100 * (i // 7))
        slow, r_slow = self.run_all(stream, fast=False)
        fast, r_fast = self.run_all(stream, fast=True)
        self.assertEqual(fast, slow)
        self.assertEqual(r_slow.frames_fast, 0)
        self.assertGreater(r_fast.frames_fast, 30)
        self.assertEqual(slow[5], (5, 5005, 101, -5, 50, 5005))
        self.assertEqual([r[0] for r in fast], list(range(40)))

    def test_loss_markers_keep_numbering_and_never_become_rows(self):
        # A streamed file's loss marker (docs/streaming.md): frame 20 of 41 holds only TSV 0x7fffffff.
        marker = frames.build_frame(1, tsv=[(0x7FFFFFFF, 9)])
        stream = self.stream(20) + marker + self.stream(20)
        tsv = batch.drop_marker_tsv(["1:0:1:%s" % b"trace_timestamp".hex(),
                                     "7fffffff:0:0:%s" % b"gdbtrace_dropped".hex()])
        self.assertEqual(tsv, 0x7FFFFFFF)
        plan = self.local_plan()
        for fast in (False, True):
            runner = batch.Runner(regs.REGBLOCK_SIZE_AVX, lambda f: plan, ts_tsv=1, by_time=True, fast=fast,
                                  marker_tsv=tsv)
            runs = runner.feed(stream)
            markers = [r for r in runs if isinstance(r, batch.Marker)]
            rows = [row for r in runs if not isinstance(r, batch.Marker) for row in r.rows]
            self.assertEqual([(m.index, m.tp, m.dropped) for m in markers], [(20, 1, 9)])
            self.assertEqual([r[0] for r in rows], list(range(20)) + list(range(21, 41)))
            out = io.StringIO()
            meta = {"timestamps": "trace_timestamp", "pid": 1, "program": "p", "thread_names": {}}
            self.assertEqual(exporters.export_runs(exporters.JsonlExporter(out, meta), runs), 40)
            lines = [json.loads(line) for line in out.getvalue().splitlines()]
            self.assertEqual(lines[20], {"frame": 20, "tracepoint": 1, "dropped": 9})
            self.assertEqual(lines[21]["frame"], 21)
        # Without the header's definition the same frame is an ordinary one (a row of nothing).
        runner = batch.Runner(regs.REGBLOCK_SIZE_AVX, lambda f: plan, ts_tsv=1, by_time=True)
        self.assertFalse(any(isinstance(r, batch.Marker) for r in runner.feed(stream)))

    def test_long_runs_and_every_check(self):
        # more than batch.BULK frames in one run; from frame 1200 the block after `g` is not where the
        # rsp-based local `w` is, from 1500 the first block is not the rbp-based `v`: the run must stop
        # where the first of the two checks fails, though the other one is tested first
        w = model.Column("w", "mem", program("  0  reg 7\n  3  const8 8\n  5  add\n  6  end"), 8,
                         [leaf("w", "int", "<q")])
        plan = self.local_plan()
        plan = model.Plan(1, 0x401000, plan.columns + [w], [])
        n = batch.BULK * 2 + 100
        stream = b""
        for i in range(n):
            rbp, rsp = 0x7ffc1000, 0x7ffb0000
            v_at = rbp - (8 if i >= 1500 else 4)
            w_at = rsp + (16 if i >= 1200 else 8)
            stream += frames.build_frame(1, regs=regblock(rbp=rbp, rsp=rsp, rip=0x401000),
                                         mem=[(v_at, struct.pack("<i", -i)), (0x404060, struct.pack("<q", 10 * i)),
                                              (w_at, struct.pack("<q", 7 * i))], tsv=[(1, 5000 + i)])
        out = {}
        for fast in (False, True):
            runner = batch.Runner(regs.REGBLOCK_SIZE_AVX, lambda f: plan, ts_tsv=1, by_time=True, fast=fast)
            runs = runner.feed(stream)
            out[fast] = [row for run in runs for row in run.rows]
            self.assertEqual(sum(map(len, runs)), n)
        self.assertEqual(out[True], out[False])
        self.assertEqual(out[True][1100], (1100, 6100, None, -1100, 11000, 6100, 7700))
        self.assertEqual(out[True][1300], (1300, 6300, None, -1300, 13000, 6300, None))
        self.assertEqual(out[True][1600][3], None)
        self.assertGreaterEqual(runner.frames_fast, 1199)

    def test_registers_of_four_bytes(self):
        # `$eflags` (reg 17, zero_ext 32) and `$cs` (reg 18, ext 32) are read from the 'R' block directly
        eflags = model.Column("$eflags", "value", program("  0  reg 17\n  3  zero_ext 32\n  5  end"), 8,
                              [leaf("$eflags", "ptr", "<I", 0, 4)])
        cs = model.Column("$cs", "value", program("  0  reg 18\n  3  ext 32\n  5  end"), 8,
                          [leaf("$cs", "int", "<i", 0, 4)])
        plan = model.Plan(1, 0x401000, [eflags, cs], [])
        stream = b""
        for i in range(50):
            block = bytearray(regblock(rip=0x401000))
            struct.pack_into("<II", block, regs.OFFSETS[regs.EFLAGS], 0x80000246 + i, 0xFFFFFF00 + i)
            stream += frames.build_frame(1, regs=bytes(block))
        out = {}
        for fast in (False, True):
            runner = batch.Runner(regs.REGBLOCK_SIZE_AVX, lambda f: plan, fast=fast)
            out[fast] = [row for run in runner.feed(stream) for row in run.rows]
        self.assertEqual(out[True], out[False])
        self.assertEqual(out[True][3][3:], (0x80000249, -253))
        self.assertEqual(runner.frames_fast, 49)

    def test_plan_without_values(self):
        # a tracepoint whose expressions could not be compiled still yields one row per frame
        empty = model.Plan(1, 0x401000, [], [("x", "no symbol")])
        stream = b"".join(frames.build_frame(1, mem=[(0x1000, b"ab")]) for _ in range(9))
        runner = batch.Runner(560, lambda f: empty, fast=True)
        rows = [row for run in runner.feed(stream) for row in run.rows]
        self.assertEqual(rows, [(i, i, None) for i in range(9)])
        self.assertGreater(runner.frames_fast, 0)

    def test_layout_rejects_other_shapes(self):
        plan = self.local_plan()
        other = frames.build_frame(1, regs=regblock(rbp=0x1000, rip=0x401000), mem=[(0x404060, struct.pack("<q", 3))],
                                   tsv=[(1, 9)])
        stream = self.stream(3) + other + self.stream(2)
        fast, runner = self.run_all(stream, fast=True, chunk=len(stream))
        self.assertEqual(len(fast), 6)
        self.assertEqual(fast[3], (3, 9, None, None, 3, 9), "v not collected in that frame")
        self.assertEqual(fast[4][3], 0)
        layout = batch.build_layout(plan, self.stream(1), regs.REGBLOCK_SIZE_AVX, ts_tsv=1)
        self.assertIsNotNone(layout)
        self.assertIsNone(layout.pattern.match(other))


class TfileTest(unittest.TestCase):
    def test_header_and_source(self):
        stream = frames.build_frame(2, regs=regblock(rip=0x401219), tsv=[(1, 5)]) + frames.build_frame(
            2, mem=[(0x404060, b"\x07\0\0\0")])
        header = exporters.tfile_header(816, "0;tstop::0;tframes:2;tcreated:2;tsize:500000",
                                        ["1:0:1:%s" % binascii.hexlify(b"trace_timestamp").decode()],
                                        ["T2:401219:E:0:0", "A2:401219:Rc0", "V2:401219:2:100"],
                                        '<?xml version="1.0"?>\n<target/>\n')
        text = header.decode("latin-1")
        self.assertTrue(text.startswith("\x7fTRACE0\nR 330\ntdesc <?xml"))
        self.assertTrue(text.endswith("tp V2:401219:2:100\n\n"))
        with tempfile.NamedTemporaryFile(suffix=".tf", delete=False) as f:
            f.write(header + stream + exporters.TFILE_END)
        try:
            src = transport.TfileSource(f.name)
            self.assertEqual(src.regblock_size, 816)
            data, last = src.frames_chunk(0, 10)
            self.assertFalse(last)
            self.assertEqual(b"".join(chunk for _, chunk in src.iter_stream(0, 100)), stream)
            self.assertEqual(len(frames.parse_stream(stream, 816)), 2)
            running, fields, _ = src.trace_status()
            self.assertFalse(running)
            self.assertEqual(fields["tframes"], "2")
            self.assertEqual(transport.tracepoint_addresses(src.upload_tracepoints()), {2: [0x401219]})
            self.assertEqual(src.tracepoint_usage(2, 0x401219), "V2:100")
            self.assertEqual(src.tdesc(), '<?xml version="1.0"?>\n<target/>')
        finally:
            os.unlink(f.name)

    def write_tfile(self, status, stream, end=b"", tdesc='<?xml version="1.0"?>\n<target/>\n'):
        header = exporters.tfile_header(816, status, [], ["T2:401219:E:0:0"], tdesc)
        f = tempfile.NamedTemporaryFile(suffix=".tf", delete=False)
        with f:
            f.write(header + stream + end)
        self.addCleanup(os.unlink, f.name)
        return f.name

    def test_stream_of_a_dead_writer_ends_at_its_last_whole_frame(self):
        # A streamed file whose stub was SIGKILLed: status still "running", no end marker, maybe
        # half a frame. Its last whole frame may end in zero bytes: that is no end marker.
        whole = [frames.build_frame(2, mem=[(0x404060, b"\x07\0\0\0\0\0\0\0")]) for _ in range(3)]
        running = "1;tnotrun:0;tframes:3"
        for cut in (b"", whole[0][:3], whole[0][:-1]):
            src = transport.TfileSource(self.write_tfile(running, b"".join(whole) + cut))
            self.assertEqual(b"".join(c for _, c in src.iter_stream(0)), b"".join(whole), len(cut))
        # An ended file with frames ending in zeros: the end marker alone is left out.
        src = transport.TfileSource(self.write_tfile("0;tstop::0;tframes:3", b"".join(whole), exporters.TFILE_END))
        self.assertEqual(b"".join(c for _, c in src.iter_stream(0)), b"".join(whole))

    def test_large_file_is_read_in_bounded_chunks(self):
        frame = frames.build_frame(2, regs=regblock(rip=0x401219), mem=[(0x404060, bytes(range(200)))])
        stream = frame * 4000  # ~4 MB
        for status in ("0;tstop::0;tframes:fa0", "1;tnotrun:0;tframes:fa0"):
            src = transport.TfileSource(self.write_tfile(status, stream, exporters.TFILE_END))
            src.CHUNK = 64 << 10
            chunks = list(src.iter_stream(0))
            self.assertLessEqual(max(len(c) for _, c in chunks), 64 << 10)
            self.assertEqual(b"".join(c for _, c in chunks), stream)
            self.assertEqual([o for o, _ in chunks], [i * (64 << 10) for i in range(len(chunks))])

    def test_header_larger_than_one_read(self):
        tdesc = '<?xml version="1.0"?>\n<target>%s</target>\n' % ("<!-- pad -->" * 20000)  # ~240 KB
        stream = frames.build_frame(2, tsv=[(1, 5)])
        src = transport.TfileSource(self.write_tfile("0;tstop::0;tframes:1", stream, exporters.TFILE_END, tdesc))
        self.assertEqual(b"".join(c for _, c in src.iter_stream(0)), stream)
        self.assertIn("<!-- pad -->", src.tdesc())

    def test_not_a_trace_file(self):
        with tempfile.NamedTemporaryFile(suffix=".tf") as f:
            f.write(b"\x7fELF" + bytes(100))
            f.flush()
            with self.assertRaises(transport.StubError):
                transport.TfileSource(f.name)
            f.seek(0)
            f.write(b"\x7fTRACE0\nR 330\n")  # no blank line: the header never ends
            f.truncate()
            f.flush()
            with self.assertRaises(transport.StubError):
                transport.TfileSource(f.name)


class RelocateTest(unittest.TestCase):
    """Where a PIE program was loaded, from a trace file's tracepoint locations."""

    # tsave's lines for `trace probe_me` (at 0x1169-0x1190 in the file, after the prologue at +0xa)
    # and `trace *0x555555555180` (says nothing about the bias).
    LINES = ["T2:555555555173:E:0:0", "A2:555555555173:R40",
             "Z2:555555555173:at:0:8:" + b"probe_me".hex(),
             "Z2:555555555173:cmd:0:c:" + b"collect i, j".hex(),
             "Z3:555555555180:at:0:f:" + b"*0x555555555180".hex()]

    def test_location_specs(self):
        self.assertEqual(relocate.location_specs(self.LINES), [(0x555555555173, "probe_me")])
        self.assertEqual(relocate.location_specs(["Z2:zz:at:0:1:61", "Z2:1:at:0:1:zz", "Z2:1:at"]), [])

    def test_one_bias_fits(self):
        functions = {"probe_me": [(0x1169, 0x1190)], "main": [(0x1200, 0x1400)]}
        specs = [(0x555555555173, "probe_me"), (0x555555555210, "main")]
        self.assertEqual(relocate.load_bias(specs, functions.get), (0x555555554000, None))
        # A non-PIE trace (or one loaded at its link address): bias 0.
        self.assertEqual(relocate.load_bias([(0x1173, "probe_me")], functions.get), (0, None))

    def test_no_bias_is_guessed(self):
        functions = {"probe_me": [(0x1169, 0x1190)], "big": [(0x1000, 0x3000)], "main": [(0x1200, 0x1400)]}
        bias, why = relocate.load_bias([(0x555555555173, "missing")], functions.get)
        self.assertIsNone(bias)
        self.assertIn("no tracepoint location", why)
        # A function longer than a page fits two load addresses: ambiguous, not guessed.
        bias, why = relocate.load_bias([(0x555555555173, "big")], functions.get)
        self.assertIsNone(bias)
        self.assertIn("2 load addresses fit", why)
        # Two tracepoints whose functions fit no common bias: another build of the program.
        bias, why = relocate.load_bias([(0x555555555173, "probe_me"), (0x555555555180, "main")], functions.get)
        self.assertIsNone(bias)
        self.assertIn("no single load address", why)

    def test_is_position_independent(self):
        with tempfile.TemporaryDirectory() as d:
            elf = Path(d) / "elf"
            for e_type, expect in ((3, True), (2, False)):
                elf.write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 9 + struct.pack("<H", e_type))
                self.assertEqual(relocate.is_position_independent(str(elf)), expect)
            elf.write_bytes(b"#!/bin/sh\n")
            self.assertFalse(relocate.is_position_independent(str(elf)))
            self.assertFalse(relocate.is_position_independent(str(Path(d) / "missing")))


class LatencyTest(unittest.TestCase):
    def test_pairs_by_stack_pointer(self):
        events = [
            (100, 0, "entry", 0x7000),   # outer call
            (110, 1, "entry", 0x6fc0),   # recursive call: deeper stack
            (150, 2, "return", 0x6fc0),
            (160, 3, "entry", 0x9000),   # another thread's stack
            (170, 4, "return", 0x7000),
            (175, 5, "return", 0x9000),
            (180, 6, "return", 0x5000),  # call began before the trace
            (190, 7, "entry", 0x7000),   # still running
        ]
        result = latency.pair_calls(events)
        self.assertEqual(sorted(d for _s, d, _k in result.durations), [15, 40, 70])
        self.assertEqual(result.unmatched_returns, 1)
        self.assertEqual(result.open_entries, 1)

    def test_return_instructions(self):
        for asm in ("ret", "ret    ", "retq", "repz ret", "ret    $0x8", "bnd ret"):
            self.assertTrue(latency.is_return(asm), asm)
        for asm in ("call   0x1130 <ret_helper>", "iretq", "lret", "jmp    0x401000"):
            self.assertFalse(latency.is_return(asm), asm)


INFO_TRACEPOINTS = """Num     Type           Disp Enb Address            What
1       tracepoint     keep y   0x000055555555522c in work at tests/programs/plugin_demo.c:41
\ttracepoint already hit 10 times
\ttrace buffer usage 8490 bytes.
        collect scaled, i, g_sample
        collect $regs
        while-stepping 2
          collect $rip
        end
\tinstalled on target
2       fast tracepoint keep n   <MULTIPLE>         
        collect f(a, b), s.x[1]
2.1                         y   0x0000555555555300 in f at a.c:3
2.2                         y   0x0000555555555400 in f at a.c:3
3       tracepoint     keep y   0x0000555555555211 in work at tests/programs/plugin_demo.c:39
        collect/s name
\tnot installed on target
"""


class InfoTracepointsTest(unittest.TestCase):
    def test_parse(self):
        tps = tracepoints.parse_info_tracepoints(INFO_TRACEPOINTS)
        self.assertEqual(sorted(tps), [1, 2, 3])
        t1 = tps[1]
        self.assertEqual(t1.collect, ["scaled", "i", "g_sample", "$regs"])
        self.assertEqual(t1.step_collect, ["$rip"])
        self.assertEqual(t1.step_count, 2)
        self.assertEqual(t1.hits, 10)
        self.assertEqual([l.address for l in t1.locations], [0x55555555522c])
        self.assertEqual(t1.locations[0].function, "work")
        self.assertEqual(t1.label(), "tp 1 work (plugin_demo.c:41)")
        t2 = tps[2]
        self.assertEqual(t2.kind, "fast tracepoint")
        self.assertFalse(t2.enabled)
        self.assertEqual([l.address for l in t2.locations], [0x555555555300, 0x555555555400])
        self.assertEqual(t2.collect, ["f(a, b)", "s.x[1]"])
        self.assertEqual(tps[3].collect, ["name"])

    def test_split_expressions(self):
        self.assertEqual(tracepoints.split_expressions("a, b[1,2], 'x,y', \"p,q\", s.t"),
                         ["a", "b[1,2]", "'x,y'", '"p,q"', "s.t"])


def escape(data):
    """RSP binary escaping, as the stub sends qGdbtrace.frames replies."""
    out = bytearray()
    for c in data:
        if c in b"#$}*":
            out += bytes([0x7D, c ^ 0x20])
        else:
            out.append(c)
    return bytes(out)


class MockStub:
    """A fake send_packet: serves a JSON status and a frame stream in chunks of `chunk` bytes."""

    def __init__(self, stream=b"", status=None, chunk=None):
        self.stream, self.status, self.chunk = stream, status, chunk
        self.sent = []

    def __call__(self, packet):
        self.sent.append(packet)
        p = packet.decode()
        if p == "qGdbtrace.status":
            return None if self.status is None else binascii.hexlify(json.dumps(self.status).encode())
        if p.startswith("qGdbtrace.frames:"):
            off, length = (int(x, 16) for x in p.split(":")[1].split(","))
            length = min(length, self.chunk or length)
            data = self.stream[off:off + length]
            return (b"l" if off + len(data) >= len(self.stream) else b"m") + escape(data)
        if p == "qTStatus":
            return b"T1;tnotrun:0;tframes:2;tcreated:2;tfree:1000;tsize:2000;circular:0"
        return None


class TransportTest(unittest.TestCase):
    def test_status_and_not_gdbtrace(self):
        stub = transport.Stub(MockStub(status={"running": False, "tracepoints": []}))
        self.assertEqual(stub.status(), {"running": False, "tracepoints": []})
        with self.assertRaises(transport.StubError) as cm:
            transport.Stub(MockStub(status=None)).status()
        self.assertIn("gdbtrace-server", str(cm.exception))
        err = transport.Stub(lambda p: b"E.no trace buffer")
        with self.assertRaises(transport.StubError) as cm:
            err.frames_chunk(0)
        self.assertIn("no trace buffer", str(cm.exception))

    def test_stream_in_chunks(self):
        stream = b"".join(frames.build_frame(1, mem=[(0x1000 + i, bytes([i, 0x7D, 0x23])) ]) for i in range(50))
        mock = MockStub(stream, chunk=37)
        stub = transport.Stub(mock)
        parser = frames.FrameParser(560)
        got = []
        for _off, chunk in stub.iter_stream(0):
            got += parser.feed(chunk)
        self.assertEqual(len(got), 50)
        self.assertEqual(got[49].mem, [(0x1000 + 49, bytes([49, 0x7D, 0x23]))])
        # The mock cannot write a local file (qGdbtrace.frames.file unanswered): packets after it.
        self.assertTrue(mock.sent[0].startswith(b"qGdbtrace.frames.file:0;"))
        self.assertEqual(mock.sent[1], b"qGdbtrace.frames:0,100000")
        self.assertEqual(list(transport.Stub(MockStub(b"")).iter_stream(0)), [])

    def test_unescape(self):
        for data in (b"", b"plain", b"}", b"}}}}", b"#$*}", b"}\x03", b"}]", b"a}#b*}$c", bytes(range(256)) * 3):
            self.assertEqual(transport.unescape_binary(escape(data)), data, data)
        with self.assertRaises(transport.StubError):
            transport.unescape_binary(b"abc}")

    def test_trace_status(self):
        running, fields, body = transport.Stub(MockStub()).trace_status()
        self.assertTrue(running)
        self.assertEqual(fields["tframes"], "2")
        self.assertTrue(body.startswith("1;tnotrun"))


if __name__ == "__main__":
    unittest.main()
