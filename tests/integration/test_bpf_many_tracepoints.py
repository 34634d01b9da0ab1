"""Thousands of eBPF tracepoints, set up as a new user would: a generated program of N small
functions (each starts with a `nop`) called in a loop, and a gdb script file with one `trace fK` +
`collect v` per function, sourced by gdb. Every tracepoint must be served by the eBPF collector (no
ptrace fallback: `monitor gdbtrace status` names the backend of each) and every hit counted
exactly, per tracepoint and in the frames gdb reads back. The stub starts with the usual soft
limit of 1024 open files.

The program and script come from tests/programs/many_functions.py, compiled by the test (gcc) into
a temporary directory. Skipped when the server has no eBPF collector here, failed instead under
CI=true or GDBTRACE_STRICT=1."""

import re
import resource
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from gdbtest import REPO, GdbTestCase, available_collectors, require, run_gdb

GENERATOR = REPO / "tests/programs/many_functions.py"

STATUS_ROW = re.compile(r"^tracepoint (\d+) at 0x[0-9a-f]+: backend (\w+), hits (\d+), frames (\d+)",
                        re.M)


def build(directory: Path, functions: int):
    """The program and the gdb script of tests/programs/many_functions.py, in DIRECTORY."""
    src, script, prog = directory / "many.c", directory / "trace_all.gdb", directory / "many"
    subprocess.run([sys.executable, str(GENERATOR), str(functions), str(src), str(script)], check=True)
    subprocess.run(["gcc", "-O1", "-g", "-fno-inline", "-o", str(prog), str(src)], check=True)
    return str(prog), str(script)


class ManyFunctions(GdbTestCase):
    def setUp(self):
        require(self, "ebpf" in available_collectors(),
                f"no eBPF collector in this server (collectors: {available_collectors()})", key="no-ebpf")
        self.dir = tempfile.TemporaryDirectory(prefix="gt-many-")
        self.addCleanup(self.dir.cleanup)
        # The usual soft limit of open files (1024) for the stub, as a user's shell gives it: each
        # eBPF tracepoint holds an fd, so the stub must raise it to the hard limit itself.
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))
        self.addCleanup(resource.setrlimit, resource.RLIMIT_NOFILE, (soft, hard))

    def test_2000_tracepoints_all_on_ebpf_hits_exact(self):
        functions, rounds = 2000, 3
        directory = Path(self.dir.name)
        prog, script = build(directory, functions)
        run = run_gdb(["break done", "monitor gdbtrace backend ebpf", f"source {script}",
                       "python import time; t0 = time.time()", "tstart",
                       "python print('tstart took %.2f s' % (time.time() - t0))",
                       "continue", "python t0 = time.time()", "tstop",
                       "python print('tstop took %.2f s' % (time.time() - t0))",
                       "tstatus", "monitor gdbtrace status",
                       f"tfind tracepoint {functions + 1}", "print v", "tfind end"],
                      program=prog, args=(rounds,), timeout=600)
        self.assertNotIn("using ptrace", run.output, run.transcript()[-3000:])
        self.assertNotIn("Bogus reply", run.output, run.transcript()[-3000:])
        rows = STATUS_ROW.findall(run.output)
        self.assertEqual(len(rows), functions, run.transcript()[-3000:])
        not_ebpf = [r for r in rows if r[1] != "ebpf"]
        self.assertEqual(not_ebpf, [], "tracepoints not on eBPF")
        wrong = [r for r in rows if int(r[2]) != rounds or int(r[3]) != rounds]
        self.assertEqual(wrong, [], "tracepoints whose hits or frames are not exactly %d" % rounds)
        self.assertOutput(run, r"Collected %d trace frames" % (functions * rounds))
        # Tracepoint N+1 (1 is the breakpoint) is the last function's, at its `nop`: its first
        # frame holds v after one call of every other function, before its own `v += N-1`.
        self.assertOutput(run, r"^\$1 = %d$" % sum(range(functions - 1)))
        for line in re.findall(r"^tst\w+ took .*", run.output, re.M):
            print(line)


if __name__ == "__main__":
    unittest.main()
