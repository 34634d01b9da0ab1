"""Call stacks of a stripped program, symbolized later: the real gdb 13 with the plugin,
gdbtrace-server running a stripped copy of tests/programs/bench_stacks (gdb has the unstripped
one, as a developer would: it sets the tracepoint by name).

The stub has no symbols for the stripped module, so its frames must come out as
module+0xOFFSET with OFFSET an ELF address of the module: addr2line and eu-addr2line on the
unstripped copy must name each one, and the path through them must be the one the program
takes (main -> path_a -> common -> leaf 300 times, path_b 700 times). The output must say which
module had no symbols and give its build-id, the Perfetto export must keep the build-id, and
with DEBUGINFOD_URLS (gdb's environment only, not the stub's) pointing at a local debuginfod
serving the unstripped copy, the names must come back. Then Debian's stripped /usr/bin/sort into
a tracepoint on libc's read: its offsets must be call sites in the file."""

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.request
from pathlib import Path

from gdbtest import (GdbTestCase, Server, available_collectors, free_port, program,
                     require, run_gdb)

from test_stacks import PLUGIN, needs_gdbtrace, read_folded


def build_id(path):
    note = subprocess.run(["readelf", "-n", path], capture_output=True, text=True, check=True).stdout
    return re.search(r"Build ID: ([0-9a-f]+)", note).group(1)


def addr2line(tool, path, offsets):
    """Function names TOOL (addr2line or eu-addr2line) gives for OFFSETS in the file at PATH."""
    out = subprocess.run([tool, "-f", "-e", path] + ["0x%x" % o for o in offsets],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    return out[0::2]  # -f: function line, then file:line


def call_instructions(path):
    """{address of the last byte of each call instruction: its text} from objdump -d of PATH."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", path], capture_output=True, text=True,
                         check=True).stdout
    insns = [(int(m.group(1), 16), m.group(2)) for m in re.finditer(r"^\s*([0-9a-f]+):\t(.*)$", out, re.M)]
    return {end - 1: text for (start, text), (end, _) in zip(insns, insns[1:]) if text.startswith("call")}


@needs_gdbtrace
class StrippedStacksTestCase(GdbTestCase):
    BACKEND = None

    def setUp(self):
        require(self, self.BACKEND in available_collectors(),
                f"no {self.BACKEND} collector in this server (collectors: {available_collectors()})")
        for tool in ("strip", "readelf", "objdump", "addr2line", "eu-addr2line", "debuginfod"):
            require(self, shutil.which(tool) is not None, f"{tool} is not installed (scripts/packages.txt)")
        self.tmp = tempfile.TemporaryDirectory(prefix="gdbtrace-stripped-")
        self.dir = Path(self.tmp.name)
        self.unstripped = program("bench_stacks")
        # The stripped copy has the same name, in a directory without its debug info.
        (self.dir / "deploy").mkdir()
        self.stripped = str(self.dir / "deploy" / "bench_stacks")
        subprocess.run(["strip", "-o", self.stripped, self.unstripped], check=True)
        self.build_id = build_id(self.stripped)
        self.assertEqual(self.build_id, build_id(self.unstripped))

    def tearDown(self):
        self.tmp.cleanup()

    def traced(self, after, gdb_env=None, before_tstart=()):
        """The stub runs the stripped copy; gdb has the unstripped one (same build-id) and traces
        leaf with stacks on; then AFTER. GDB_ENV: variables set for gdb only."""
        commands = ["source %s" % PLUGIN, "set trace-buffer-size %d" % (128 << 20),
                    "monitor gdbtrace backend %s" % self.BACKEND, "monitor gdbtrace stacks on",
                    "trace leaf"] + list(before_tstart) + ["tstart", "continue", "monitor gdbtrace status", "tstop"] + list(after)
        with Server("once", program=self.stripped) as server:
            saved = dict(os.environ)
            os.environ.update(gdb_env or {})
            try:
                # gdb's own debuginfod client stays off: the names must come from the plugin.
                run = run_gdb(commands, program=self.unstripped, server=server, timeout=120,
                              gdb_args=["-iex", "set debuginfod enabled off"])
            finally:
                os.environ.clear()
                os.environ.update(saved)
        self.assertNoOutput(run, r"Python Exception|Traceback|Error occurred in Python")
        self.assertOutput(run, r"tracepoint 1 at 0x[0-9a-f]+: backend %s" % self.BACKEND)
        return run

    def test_frames_are_module_offsets_that_resolve(self):
        folded, perfetto = self.dir / "leaf.folded", self.dir / "leaf.json"
        run = self.traced(["gdbtrace stacks -top 3 -folded %s" % folded,
                           "gdbtrace export perfetto %s" % perfetto])
        # The output says which module had no symbols, with its build-id.
        self.assertOutput(run, r"module %s has only dynamic symbols \(stripped\): frames in it are "
                               r"bench_stacks\+0xOFFSET .*build-id %s" % (re.escape(self.stripped), self.build_id))
        paths = read_folded(folded)
        offset = re.compile(r"^bench_stacks\+0x([0-9a-f]+)$")
        expected = {"path_a": 300, "path_b": 700}
        for stack, count in paths.items():
            names = stack.split(";")
            self.assertFalse(any("@0x" in n for n in names), stack)  # no runtime address
            mine = [int(offset.match(n).group(1), 16) for n in names if offset.match(n)]
            self.assertTrue(mine, stack)
            for tool in ("addr2line", "eu-addr2line"):
                resolved = addr2line(tool, self.unstripped, mine)
                # libc's frames are named by the stub (its debug file is installed).
                full = [resolved.pop(0) if offset.match(n) else n for n in names]
                if full[-2] == "deep":
                    continue  # the one deep(64) stack, truncated at 8 KiB
                self.assertEqual(full[0], "_start", (tool, stack, full))
                main = full.index("main")
                self.assertEqual(full[main + 2:], ["common", "leaf"], (tool, stack, full))
                self.assertIn("__libc_start_call_main", full[:main], (tool, stack, full))
                self.assertEqual(expected.get(full[main + 1]), count, (tool, stack, full))
        self.assertEqual(sorted(c for c in paths.values() if c > 1), [300, 700], paths)
        # The Perfetto export keeps the module's build-id for a symbolizer.
        modules = json.loads(perfetto.read_text())["otherData"]["modules"]
        mine = [m for m in modules if m["path"] == self.stripped]
        self.assertEqual(mine, [{"name": "bench_stacks", "path": self.stripped, "build_id": self.build_id,
                                 "symbols": "dynamic"}], modules)

    def test_names_come_back_from_a_local_debuginfod(self):
        debug_dir = self.dir / "debug"
        debug_dir.mkdir()
        shutil.copy(self.unstripped, debug_dir / "bench_stacks")
        port = free_port()
        env = {"DEBUGINFOD_URLS": "http://127.0.0.1:%d" % port,
               "DEBUGINFOD_CACHE_PATH": str(self.dir / "cache"), "DEBUGINFOD_TIMEOUT": "10"}
        server = subprocess.Popen(["debuginfod", "-p", str(port), "-d", str(self.dir / "db.sqlite"),
                                   "-F", str(debug_dir)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            self.wait_indexed(env["DEBUGINFOD_URLS"])
            folded = self.dir / "named.folded"
            run = self.traced(["gdbtrace stacks -top 3 -folded %s" % folded], gdb_env=env)
        finally:
            server.terminate()
            server.wait(timeout=10)
        self.assertOutput(run, r"module %s has only dynamic symbols; its frames were named from debuginfod's "
                               r"\S+ \(build-id %s\)" % (re.escape(self.stripped), self.build_id))
        self.assertOutput(run, r"700\s+69\.9%\s+leaf <- common <- path_b <- main")
        paths = read_folded(folded)
        self.assertEqual(paths.get("main;path_a;common;leaf"), 300, paths)
        self.assertEqual(paths.get("main;path_b;common;leaf"), 700, paths)
        self.assertNoOutput(run, r"bench_stacks\+0x")

    def test_debian_sort_into_a_traced_libc_function(self):
        # Debian's own stripped /usr/bin/sort (no debug info installed for it) reading its input:
        # a tracepoint on libc's read, pending until libc loads. sort's frames are sort+0xOFFSET;
        # with no unstripped copy to ask, each OFFSET must lie in a call instruction that ends at
        # OFFSET + 1 (a return address - 1), which neither a runtime address nor a file offset of
        # a later segment would.
        sort = "/usr/bin/sort"
        symbols = subprocess.run(["readelf", "-SW", sort], capture_output=True, text=True, check=True).stdout
        require(self, " .symtab " not in symbols and " .dynsym " in symbols, "%s is not stripped" % sort)
        data = self.dir / "input.txt"
        data.write_text("".join("%d\n" % ((i * 7919) % 200003) for i in range(200000)))
        run = run_gdb(["source %s" % PLUGIN, "set trace-buffer-size %d" % (32 << 20),
                       "monitor gdbtrace backend %s" % self.BACKEND, "monitor gdbtrace stacks on",
                       "trace read", "tstart", "continue", "monitor gdbtrace status", "tstop",
                       "gdbtrace stacks -all -top 5"],
                      program=sort, args=["-o", str(self.dir / "sorted.txt"), str(data)], timeout=120,
                      gdb_args=["-iex", "set breakpoint pending on", "-iex", "set debuginfod enabled off"])
        self.assertNoOutput(run, r"Python Exception|Traceback|Error occurred in Python")
        self.assertOutput(run, r"tracepoint 1 at 0x[0-9a-f]+: backend %s, hits [1-9]" % self.BACKEND)
        self.assertOutput(run, r"module %s has only dynamic symbols \(stripped\): frames in it are sort\+0xOFFSET "
                               r".*build-id %s" % (sort, build_id(sort)))
        paths = re.findall(r"^\s+\d+\s+[\d.]+%\s+(read <- .*)$", run.output, re.M)
        self.assertTrue(paths, run.transcript())
        calls = call_instructions(sort)
        for path in paths:
            names = path.split(" <- ")
            self.assertIn("__libc_start_main", names, path)
            offsets = [int(n[len("sort+0x"):], 16) for n in names if n.startswith("sort+0x")]
            self.assertGreaterEqual(len(offsets), 3, path)  # sort's reader, main, _start
            for offset in offsets:
                self.assertIn(offset, calls, "sort+0x%x is not in a call instruction: %s" % (offset, path))
            # The innermost of sort's frames calls into libc's stdio.
            self.assertIn("fread_unlocked", calls[offsets[0]], path)

    def wait_indexed(self, url):
        """Until the local debuginfod at URL serves the unstripped copy (it indexes -F in the
        background after it starts). Asked directly: a client would cache the misses."""
        deadline = time.time() + 60
        while True:
            try:
                with urllib.request.urlopen("%s/buildid/%s/debuginfo" % (url, self.build_id), timeout=5) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError) as e:
                if time.time() > deadline:
                    self.fail("debuginfod did not serve %s: %s" % (self.build_id, e))
            time.sleep(0.5)


class StrippedStacksEbpf(StrippedStacksTestCase):
    BACKEND = "ebpf"


class StrippedStacksPtrace(StrippedStacksTestCase):
    BACKEND = "ptrace"

    def test_deleted_module_keeps_runtime_addresses_and_says_why(self):
        # The running program's file is removed before tstart: the stub cannot read it, so there
        # is neither a name nor an ELF address to give, and the output says so. (ptrace only: the
        # eBPF collector cannot place a uprobe in a deleted file, and says that at tstart.)
        run = self.traced(["gdbtrace stacks -top 2"], before_tstart=["shell rm %s" % self.stripped])
        self.assertOutput(run, r"module %s \(deleted\) could not be read by the stub \(deleted or replaced "
                               r"since it was mapped\): frames in it are bench_stacks \(deleted\)@0xPC, runtime "
                               r"addresses" % re.escape(self.stripped))
        self.assertOutput(run, r"1001\s+100\.0%\s+bench_stacks \(deleted\)@0x[0-9a-f]+ <- \[unwind error\]")


del StrippedStacksTestCase

if __name__ == "__main__":
    unittest.main()
