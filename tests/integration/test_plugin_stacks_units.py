"""Unit tests of the plugin's call-stack parts (no gdb, no stub): qGdbtrace.stacks lines,
call-path counting, the folded format, the flame graph SVG, and the packet loop over a mocked
connection."""

import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "gdb-plugin"))

from gdbtrace_plugin import flamegraph, stacks, transport  # noqa: E402

LEAF = ["S401000 leaf;prog;prog.c:3", "S401100 common;prog;prog.c:8", "S401200 path_a;prog;prog.c:12",
        "S401300 main;prog;prog.c:20", "S7f0000 __libc_start_call_main;libc.so.6;", "S401010 _start;prog;",
        "F0 T1 ok\t401000\t401100\t401200\t401300\t7f0000\t401010"]


def line(frame, status, *names):
    """S lines for NAMES (pc 0x1000 + position) and the F line of a stack of them."""
    return ["S%x %s;prog;" % (0x1000 + i, n) for i, n in enumerate(names)] + \
        ["\t".join(["F%x T1 %s" % (frame, status)] + ["%x" % (0x1000 + i) for i in range(len(names))])]


def parse(lines):
    [stack] = stacks.parse_lines(lines)
    return stack


class StackLineTest(unittest.TestCase):
    def test_parse(self):
        s = parse(LEAF)
        self.assertEqual((s.frame, s.tp, s.status, s.error), (0, 1, "ok", ""))
        self.assertEqual(s.entries[0], (0x401000, "leaf", "prog", "prog.c:3", None, None))
        self.assertEqual(s.names(), ["main", "path_a", "common", "leaf"])
        self.assertEqual(s.names(full=True)[0], "_start")

    def test_truncated_and_errors_are_said(self):
        t = parse(line(1, "truncated", "leaf", "deep", "deep"))
        self.assertEqual(t.names(), ["[truncated]", "deep", "deep", "leaf"])
        e = parse(line(2, "error:no CFI for 0x7f00", "leaf", "main", "weird"))
        self.assertEqual(e.error, "no CFI for 0x7f00")
        self.assertEqual(e.names()[0], "[unwind error]")  # not cut at main: the end is unknown

    def test_unnamed_pc(self):
        s = parse(["S7f0010 ;libx.so;", "S7f0020 ;;", "F0 T1 ok\t7f0010\t7f0020"])
        self.assertEqual(s.names(), ["0x7f0020", "libx.so@0x7f0010"])

    def test_stripped_module_is_module_plus_elf_address(self):
        lines = ["M0 abcd;dynamic;/opt/app/prog", "M1 ;none;/opt/app/libx.so",
                 "S5555555551a2 ;prog;;0;11a1", "S555555555300 main;prog;;0;12ff",
                 "S7f0010 ;libx.so;;1;", "F0 T1 ok\t5555555551a2\t555555555300\t7f0010"]
        s = parse(lines)
        self.assertEqual(s.names(full=True), ["libx.so@0x7f0010", "main", "prog+0x11a1"])
        counts = stacks.StackCounts()
        counts.add(s)
        self.assertEqual(sorted(counts.unnamed), ["/opt/app/libx.so", "/opt/app/prog"])
        text = stacks.format_top(counts, 1)
        self.assertIn("module /opt/app/prog has only dynamic symbols (stripped): frames in it are "
                      "prog+0xOFFSET (ELF address; eu-addr2line -e FILE 0xOFFSET), build-id abcd", text)
        self.assertIn("module /opt/app/libx.so has no symbols: frames in it are libx.so+0xOFFSET", text)
        table = stacks.StackTable()
        table.add(s)
        self.assertEqual([m.as_json() for m in table.modules.values()][0],
                         {"name": "prog", "path": "/opt/app/prog", "build_id": "abcd", "symbols": "dynamic"})

    def test_symbolizer_names_what_the_stub_could_not(self):
        asked = []

        def symbolizer(mod, offset):
            asked.append((mod.build_id, offset))
            return {0x11a1: "leaf"}.get(offset)

        lines = ["M0 abcd;dynamic;/opt/app/prog", "M1 ef01;full;/lib/libc.so.6", "S5555555551a2 ;prog;;0;11a1",
                 "S5555555552a2 ;prog;;0;12a1", "S555555555300 main;prog;;0;12ff", "S7f0000 ;libc.so.6;;1;2000",
                 "F0 T1 ok\t5555555551a2\t5555555552a2\t555555555300\t7f0000"]
        [s] = stacks.parse_lines(lines, symbolizer)
        self.assertEqual(s.names(full=True), ["libc.so.6+0x2000", "main", "prog+0x12a1", "leaf"])
        # Named pcs are not asked, nor modules whose .symtab the stub already had.
        self.assertEqual(asked, [("abcd", 0x11a1), ("abcd", 0x12a1)])

    def test_unreadable_module_keeps_runtime_addresses_and_says_why(self):
        s = parse(["M0 ;unreadable;/opt/app/gone.so", "S7f0010 ;gone.so;;0;", "F0 T1 ok\t7f0010"])
        self.assertEqual(s.names(), ["gone.so@0x7f0010"])
        counts = stacks.StackCounts()
        counts.add(s)
        self.assertIn("module /opt/app/gone.so could not be read by the stub (deleted or replaced since it "
                      "was mapped): frames in it are gone.so@0xPC, runtime addresses", stacks.format_top(counts, 1))

    def test_malformed(self):
        for bad in ([""], ["F0 T1"], ["X0 T1 ok"], ["F0 T1 ok\t401000"], ["S401000 leaf", "F0 T1 ok\t401000"],
                    ["S401000 leaf;p;;7;10", "F0 T1 ok\t401000"], ["M0 abcd", "F0 T1 nostack"],
                    ["F0 T1 ok\tzz"]):
            with self.assertRaises(ValueError):
                parse(bad)


class CountsTest(unittest.TestCase):
    def test_folded_and_top(self):
        counts = stacks.StackCounts()
        for i in range(3):
            counts.add(parse(line(i, "ok", "leaf", "common", "path_b", "main")))
        counts.add(parse(line(3, "ok", "leaf", "common", "path_a", "main")))
        counts.add(parse(["F4 T1 nostack"]))
        self.assertEqual(counts.folded_lines(), ["main;path_b;common;leaf 3", "main;path_a;common;leaf 1"])
        self.assertEqual(counts.frames, 5)
        self.assertEqual(counts.with_stacks, 4)
        text = stacks.format_top(counts, 1)
        self.assertIn("5 frames, 4 with a stack, 2 distinct call paths", text)
        self.assertIn("1 without a stack snapshot", text)
        self.assertIn("75.0%  leaf <- common <- path_b <- main", text)
        with tempfile.NamedTemporaryFile("w", suffix=".folded", delete=False) as f:
            f.write("\n".join(counts.folded_lines()) + "\n")
        self.assertEqual(stacks.read_folded(f.name),
                         [(["main", "path_b", "common", "leaf"], 3), (["main", "path_a", "common", "leaf"], 1)])
        Path(f.name).unlink()


class FlamegraphTest(unittest.TestCase):
    def test_svg_is_well_formed_and_sized_by_counts(self):
        paths = [(["main", "path_b", "common", "leaf"], 700), (["main", "path_a", "common", "leaf"], 300),
                 (["main", "a<b> & \"c\""], 1)]
        svg = flamegraph.render_svg(paths, "t <1>")
        root = ET.fromstring(svg)  # well-formed, names escaped
        ns = "{http://www.w3.org/2000/svg}"
        boxes = {g.get("data-name") + "/" + g.get("data-d"): g for g in root.iter(ns + "g")}
        self.assertEqual(boxes["all/0"].get("data-w"), "1")
        self.assertAlmostEqual(float(boxes["path_b/2"].get("data-w")), 700 / 1001)
        self.assertAlmostEqual(float(boxes["path_a/2"].get("data-w")), 300 / 1001)
        self.assertIn("a<b> & \"c\"/2", boxes)
        self.assertIn("(700 samples, 69.93%)", boxes["path_b/2"].find(ns + "title").text)
        self.assertNotIn("http://", svg.replace("http://www.w3.org/2000/svg", ""))  # nothing fetched


class StacksPacketTest(unittest.TestCase):
    def test_iterates_until_the_last_chunk(self):
        sent = []
        replies = {b"qGdbtrace.stacks:0,100000": b"mF0 T1 nostack\nF1 T1 nostack\n",
                   b"qGdbtrace.stacks:2,100000": b"lS1 a}];m;\nF2 T1 ok\t1\n"}

        def send(packet):
            sent.append(packet)
            return replies[packet]

        lines = list(transport.Stub(send).iter_stacks())
        self.assertEqual(lines, ["F0 T1 nostack", "F1 T1 nostack", "S1 a};m;", "F2 T1 ok\t1"])
        self.assertEqual(list(stacks.parse_lines(lines))[2].entries, [(1, "a}", "m", "", None, None)])
        self.assertEqual(len(sent), 2)

    def test_errors(self):
        with self.assertRaises(transport.StubError):
            transport.Stub(lambda p: b"E.qGdbtrace.stacks frame beyond the trace data").stacks_chunk(5)
        with self.assertRaises(transport.StubError):
            transport.Stub(lambda p: None).stacks_chunk(0)


class LocalFramesTest(unittest.TestCase):
    """qGdbtrace.frames.file: the stub writes the stream into the plugin's file on the same host;
    a stub that cannot (another host, older) is asked once, then only with packets."""

    def test_local_file_read_and_removed(self):
        stream = bytes(range(256)) * 40000  # 10 MB: several LOCAL_CHUNKs
        seen = []

        def send(packet):
            seen.append(packet)
            path = bytes.fromhex(packet.split(b";", 1)[1].decode()).decode()
            self.assertEqual(Path(path).stat().st_size, 0)
            Path(path).write_bytes(stream[5:])
            return b"F%x" % (len(stream) - 5)

        stub = transport.Stub(send)
        chunks = list(stub.iter_stream(5))
        self.assertEqual(b"".join(c for _, c in chunks), stream[5:])
        self.assertEqual([o for o, _ in chunks], [5 + i * stub.LOCAL_CHUNK for i in range(len(chunks))])
        self.assertTrue(seen[0].startswith(b"qGdbtrace.frames.file:5;"))
        path = bytes.fromhex(seen[0].split(b";", 1)[1].decode()).decode()
        self.assertFalse(Path(path).exists())

    def test_falls_back_to_packets(self):
        seen = []

        def send(packet):
            seen.append(packet)
            if packet.startswith(b"qGdbtrace.frames.file:"):
                return b"E.qGdbtrace.frames.file: No such file or directory"
            return b"labc"

        stub = transport.Stub(send)
        self.assertEqual(list(stub.iter_stream(0)), [(0, b"abc")])
        self.assertEqual(list(stub.iter_stream(0)), [(0, b"abc")])
        self.assertEqual(sum(p.startswith(b"qGdbtrace.frames.file:") for p in seen), 1)


if __name__ == "__main__":
    unittest.main()
