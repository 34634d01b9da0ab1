"""gdbtrace plugin: `gdbtrace trace-functions REGEX [in MODULE] [-collect EXPRS]` makes one gdb
tracepoint per matching function (tests/programs/bench_many.c: many_0000..many_9999, called round
robin over the first `span`), which gdb's own commands see (info tracepoints, tfind); `gdbtrace
status` then names the functions with the most hits and, above 50 locations, sums the rows per
collector. Known counts: bench_many CALLS SPAN calls each of the first SPAN functions CALLS/SPAN
times."""

import re
import unittest

from test_plugin_export import PLUGIN, PluginTestCase, needs_gdbtrace
from gdbtest import run_gdb

TO_READY = ["source %s" % PLUGIN, "break bench_ready", "continue"]
TO_END = ["break exit", "tstart", "continue", "tstop"]


def many_run(commands, calls, span, **kw):
    return run_gdb(TO_READY + list(commands), program="bench_many", args=(calls, span), **kw)


@needs_gdbtrace
class TraceFunctions(PluginTestCase):
    def test_one_tracepoint_per_function_and_top_functions(self):
        # 10 functions called 20 times each; 8 of them traced: 160 hits, 12.5 % each.
        run = many_run(["gdbtrace trace-functions ^many_000[0-7]$ in bench_many -collect $rdi",
                        "info tracepoints"] + TO_END + [
                           "tstatus", "gdbtrace status -top 3",
                           "tfind tracepoint 3", "print $rdi", "tfind none"], calls=200, span=10)
        self.assertNoPythonErrors(run)
        self.assertOutput(run, r"Defined 8 tracepoints \(2-9\) on functions matching '\^many_000\[0-7\]\$': "
                               r"8 in bench_many; collecting \$rdi\.")
        # gdb's own tracepoints, one per function entry, with the collect action.
        self.assertEqual(len(re.findall(r"^\d+\s+tracepoint\s+keep\s+y\s+0x[0-9a-f]+ in many_000[0-7] ",
                                        run.stdout, re.MULTILINE)), 8, run.transcript())
        self.assertOutput(run, r"^\s+collect \$rdi$")
        self.assertOutput(run, r"Collected 160 trace frames")
        self.assertOutput(run, r"Top 3 functions by hits \(of 8 tracepoint locations, 160 hits\):")
        top = re.findall(r"^  (many_000[0-7])\s+(\d+) \(12\.5%\)$", run.stdout, re.MULTILINE)
        self.assertEqual(top, [("many_0000", "20"), ("many_0001", "20"), ("many_0002", "20")],
                         run.transcript())
        # tfind sees the frames: tracepoint 3 is many_0001, first called with i = 1.
        self.assertOutput(run, r"Found trace frame \d+, tracepoint 3")
        self.assertOutput(run, r"^\$1 = 1$")

    def test_many_locations_summed_per_collector(self):
        run = many_run(["gdbtrace trace-functions ^many_00[0-5][0-9]$"] + TO_END + ["gdbtrace status -top 2"],
                       calls=600, span=60)
        self.assertNoPythonErrors(run)
        self.assertOutput(run, r"Defined 60 tracepoints \(2-61\) on functions matching .*: 60 in bench_many\.")
        self.assertOutput(run, r"^60 tracepoint locations \(gdbtrace status -all: one row each\):$")
        self.assertOutput(run, r"^  (ebpf|ptrace|module): 60 locations, hits 600, frames 600, drops 0, errors 0")
        self.assertOutput(run, r"Top 2 functions by hits \(of 60 tracepoint locations, 600 hits\):")

    def test_refusals(self):
        run = many_run(["gdbtrace trace-functions ^no_such_function$",
                        "gdbtrace trace-functions ^many_0000$ in libc.so.6",
                        "gdbtrace trace-functions",
                        "gdbtrace trace-functions ^many_0000$ -collect",
                        "gdbtrace trace-functions ([",
                        "info tracepoints"], calls=10, span=1)
        self.assertNoPythonErrors(run)
        self.assertOutput(run, r"gdbtrace trace-functions: no function matches '\^no_such_function\$'$")
        self.assertOutput(run, r"no function matches '\^many_0000\$' in libc\.so\.6")
        self.assertOutput(run, r"usage: gdbtrace trace-functions REGEX \[in MODULE\] \[-collect EXPRS\]")
        self.assertOutput(run, r"-collect needs expressions")
        self.assertOutput(run, r"bad regex '\(\['")
        self.assertOutput(run, r"No tracepoints\.")

    def test_needs_a_running_program(self):
        run = run_gdb(["source %s" % PLUGIN, "gdbtrace trace-functions ^many_0000$"], program="bench_many",
                      args=(10, 1), mode="multi")
        self.assertOutput(run, r"the program is not running")


if __name__ == "__main__":
    unittest.main()
