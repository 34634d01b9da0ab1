"""Call stacks at tracepoint hits end to end: the real gdb 13 with the plugin, gdbtrace-server
with `monitor gdbtrace stacks on`, each host collector (eBPF, ptrace) in turn.

Tracee: tests/programs/bench_stacks.c, built -O2 without frame pointers (only DWARF CFI unwinds
it): main -> path_a -> common -> leaf 300 times, main -> path_b -> common -> leaf 700 times, then
qsort (libc) -> compare_ints, then deep(64) -> ... -> leaf, deeper than an 8 KiB snapshot.
The folded file must give exactly those counts; the deep stack must start with [truncated]
(never a made-up caller); a stack through libc must name libc's functions; a snapshot that runs
past the end of the stack mapping must stop there (no filler bytes) and still unwind."""

import collections
import json
import re
import tempfile
import unittest
from pathlib import Path

from gdbtest import GdbTestCase, available_collectors, is_stock_gdbserver, program, require, run_gdb

REPO = Path(__file__).resolve().parents[2]
PLUGIN = REPO / "gdb-plugin" / "gdbtrace.py"

needs_gdbtrace = unittest.skipIf(is_stock_gdbserver(), "needs gdbtrace-server (stacks)")


def read_folded(path):
    out = {}
    for line in Path(path).read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        out[stack] = int(count)
    return out


@needs_gdbtrace
class StacksTestCase(GdbTestCase):
    BACKEND = None

    def setUp(self):
        require(self, self.BACKEND in available_collectors(),
                f"no {self.BACKEND} collector in this server (collectors: {available_collectors()})")
        self.tmp = tempfile.TemporaryDirectory(prefix="gdbtrace-stacks-")
        self.dir = Path(self.tmp.name)

    def tearDown(self):
        self.tmp.cleanup()

    def traced(self, tracepoint, after, stacks="on", until=None, server_args=()):
        """gdb: TRACEPOINT with stacks, bench_stacks run to its end (or a breakpoint at UNTIL),
        then AFTER."""
        # A stack snapshot makes every frame kilobytes: as docs/stacks.md tells users, the buffer
        # grows with it (the eBPF rings are sized from it; 5 MB gives 1 MB rings that a stub
        # starved of CPU lets overflow at 1 000 hits of 8-64 KB).
        run = run_gdb(["source %s" % PLUGIN, "set trace-buffer-size %d" % (128 << 20),
                       "monitor gdbtrace backend %s" % self.BACKEND,
                       "monitor gdbtrace stacks %s" % stacks, "trace %s" % tracepoint] +
                      (["break %s" % until] if until else []) + ["tstart",
                       "continue", "monitor gdbtrace status", "tstop"] + list(after),
                      program="bench_stacks", timeout=120, server_args=server_args)
        self.assertNoOutput(run, r"Python Exception|Traceback|Error occurred in Python")
        self.assertOutput(run, r"tracepoint 1 at 0x[0-9a-f]+: backend %s" % self.BACKEND)
        self.assertOutput(run, r"stacks: on, \d+ bytes from \$sp per hit")
        return run

    def test_folded_counts_of_two_paths(self):
        folded, perfetto = self.dir / "leaf.folded", self.dir / "leaf.json"
        run = self.traced("leaf", ["gdbtrace stacks -top 3 -folded %s" % folded,
                                   "gdbtrace export perfetto %s" % perfetto])
        self.assertOutput(run, r"1001 frames, 1001 with a stack, 3 distinct call paths")
        self.assertOutput(run, r"700\s+69\.9%\s+leaf <- common <- path_b <- main")
        self.assertOutput(run, r"300\s+30\.0%\s+leaf <- common <- path_a <- main")
        paths = read_folded(folded)
        self.assertEqual(paths.pop("main;path_a;common;leaf"), 300, run.transcript())
        self.assertEqual(paths.pop("main;path_b;common;leaf"), 700, run.transcript())
        # deep(64) needs ~20 KiB of stack: the 8 KiB snapshot holds part of it, and says so.
        [(deep, count)] = paths.items()
        self.assertEqual(count, 1)
        names = deep.split(";")
        self.assertEqual(names[0], "[truncated]", deep)
        self.assertEqual(names[-1], "leaf")
        self.assertTrue(set(names[1:-1]) == {"deep"}, deep)
        self.assertGreater(len(names), 10)
        # The Perfetto export carries each frame's stack: "sf" into "stackFrames", and as text.
        trace = json.loads(perfetto.read_text())
        events = [e for e in trace["traceEvents"] if e.get("ph") == "i"]
        self.assertEqual(collections.Counter(e["args"].get("stack") for e in events)
                         ["main;path_b;common;leaf"], 700)
        nodes = trace["stackFrames"]
        leaf = next(e for e in events if e["args"].get("stack") == "main;path_a;common;leaf")
        chain, node = [], leaf["sf"]
        while node is not None:
            chain.append(nodes[node]["name"])
            node = nodes[node].get("parent")
        self.assertEqual(chain, ["leaf", "common", "path_a", "main"])

    def test_whole_deep_stack_with_a_large_snapshot(self):
        folded = self.dir / "deep.folded"
        self.traced("leaf", ["gdbtrace stacks -folded %s" % folded], stacks="on 65536")
        paths = read_folded(folded)
        self.assertEqual(paths["main;path_b;common;leaf"], 700)
        self.assertEqual(paths["main;" + "deep;" * 65 + "leaf"], 1, paths.keys())

    def test_stack_through_a_shared_library(self):
        folded = self.dir / "libc.folded"
        run = self.traced("compare_ints", ["gdbtrace stacks -all -folded %s" % folded,
                                           "maint packet qGdbtrace.stacks:0,1"])
        paths = read_folded(folded)
        self.assertTrue(paths, run.transcript())
        for stack in paths:
            names = stack.split(";")
            self.assertEqual(names[-1], "compare_ints", stack)
            main = names.index("main")
            self.assertTrue(any("qsort" in n for n in names[main + 1:-1]), stack)  # libc's own frames
            self.assertIn("__libc_start_main", stack)  # the callers of main, with -all
            self.assertEqual(names[0], "_start", stack)
        # The packet names the module (path, build-id, a full symbol table) and, with debug info,
        # the source line; each pc with the module's id and its ELF address.
        self.assertOutput(run, r"received: \"[ml]M0 [0-9a-f]{40};full;%s\\x0a"
                               r"S[0-9a-f]+ compare_ints;bench_stacks;bench_stacks\.c:\d+;0;[0-9a-f]+\\x0a"
                               r".*;libc\.so\.6;.*F0 T1 ok\\x09[0-9a-f]+\\x09" % re.escape(program("bench_stacks")))

    def test_gdb_bt_in_a_trace_frame_and_a_saved_tfile(self):
        # The snapshot is ordinary 'R' + 'M' blocks: gdb's own `bt` unwinds a selected trace frame,
        # live and from the file tsave wrote (a fresh gdb, PIE loaded where the run had it).
        tfile = self.dir / "stacks.tf"
        run = self.traced("leaf", ["tsave %s" % tfile, "tfind 700", "bt", "tfind none",
                                   "info proc mappings"], until="deep")
        bt = [r"#0  leaf \(", r"#1  0x[0-9a-f]+ in common \(", r"#2  0x[0-9a-f]+ in path_b \(",
              r"#3  0x[0-9a-f]+ in main \("]
        self.assertOrdered(run, bt)
        base = re.search(r"^\s*(0x[0-9a-f]+)\s+0x[0-9a-f]+\s+0x[0-9a-f]+\s+0x0\s+\S+\s+\S*bench_stacks$",
                         run.output, re.M)
        self.assertTrue(base, run.transcript())
        again = run_gdb(["symbol-file -o %s %s" % (base.group(1), program("bench_stacks")),
                         "target tfile %s" % tfile, "tfind 700", "bt"], connect=False)
        self.assertOrdered(again, bt)

    def test_small_environment_keeps_the_frames_next_to_the_stack_top(self):
        # A program started with an empty environment (as by `env -i`, or a service manager) has
        # main's frame within a few hundred bytes of the stack mapping's end: the snapshot piece that
        # crosses that end must keep what lies before it, or no stack unwinds past leaf.
        check = self.dir / "check.gdb"
        check.write_text(CHECK_SNAPSHOT)
        run = self.traced("leaf", ["info proc mappings", "tfind 0", "source %s" % check,
                                   "tfind none", "gdbtrace stacks -all -top 2"],
                          until="deep", server_args=("--wrapper", "env", "-i", "--"))
        m = re.search(r"SNAPSHOT sp=(0x[0-9a-f]+) end=(0x[0-9a-f]+) blocks=(\d+) contiguous=(\w+)",
                      run.output)
        self.assertTrue(m, run.transcript())
        self.assertEqual(m.group(4), "True", run.transcript())
        stack_end = re.search(r"^\s*0x[0-9a-f]+\s+(0x[0-9a-f]+)\s.*\[stack\]", run.output, re.M)
        self.assertTrue(stack_end, run.transcript())
        self.assertEqual(int(m.group(2), 16), int(stack_end.group(1), 16),
                         "the snapshot must reach the mapping's end\n" + run.transcript())
        self.assertOutput(run, r"700\s+70\.0%\s+leaf <- common <- path_b <- main <- "
                               r"__libc_start_call_main <- __libc_start_main <- _start")

    def test_snapshot_stops_at_the_end_of_the_stack_mapping(self):
        # 64 KiB from $sp in main's callees runs past the top of the stack: the pieces past the
        # mapping's end are left out (no filler), the rest is the tracee's memory, byte for byte
        # as gdb reads it from the frame, and the stacks still unwind to _start.
        check = self.dir / "check.gdb"
        check.write_text(CHECK_SNAPSHOT)
        run = self.traced("leaf", ["info proc mappings", "tfind 0", "source %s" % check,
                                   "tfind none", "gdbtrace stacks -all -top 2"],
                          stacks="on 65536", until="deep")
        m = re.search(r"SNAPSHOT sp=(0x[0-9a-f]+) end=(0x[0-9a-f]+) blocks=(\d+) contiguous=(\w+)",
                      run.output)
        self.assertTrue(m, run.transcript())
        sp, end = int(m.group(1), 16), int(m.group(2), 16)
        self.assertEqual(m.group(4), "True", run.transcript())
        self.assertLess(end - sp, 65536, "the snapshot must stop at the mapping's end")
        self.assertGreater(end - sp, 64, run.transcript())
        # The [stack] mapping's end, from the stub's /proc view while the process was stopped.
        stack_end = re.search(r"^\s*0x[0-9a-f]+\s+(0x[0-9a-f]+)\s.*\[stack\]", run.output, re.M)
        self.assertTrue(stack_end, run.transcript())
        self.assertLessEqual(end, int(stack_end.group(1), 16))
        self.assertOutput(run, r"700\s+70\.0%\s+leaf <- common <- path_b <- main <- "
                               r"__libc_start_call_main <- __libc_start_main <- _start")


# Runs inside gdb at `tfind 0`: the frame's memory blocks from the stub's bulk packet.
CHECK_SNAPSHOT = r"""
python
import gdb
from gdbtrace_plugin import session
stub = session.current_stub()
status = stub.status()
regblock = session.register_block_size(stub, status)
frame = next(session.iter_frames(stub, regblock))
sp = int(gdb.parse_and_eval("$sp"))
blocks = sorted(frame.mem)
contiguous = blocks[0][0] == sp and all(a + len(d) == b for (a, d), (b, _) in zip(blocks, blocks[1:]))
end = blocks[-1][0] + len(blocks[-1][1])
print("SNAPSHOT sp=%#x end=%#x blocks=%d contiguous=%s" % (sp, end, len(blocks), contiguous))
end
"""


class StacksEbpf(StacksTestCase):
    BACKEND = "ebpf"


class StacksPtrace(StacksTestCase):
    BACKEND = "ptrace"


del StacksTestCase

if __name__ == "__main__":
    unittest.main()
