"""When no in-kernel collector can be created, gdb is told at tstart (once per run) and the status
reports say so: the server runs without CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN (dropped from its
capability bounding set with setpriv, so bpf() really fails with EPERM), and the tracepoint still
collects through ptrace. Needs root (to have the capabilities to drop) and setpriv."""

import json
import os
import re
import shutil
import stat
import tempfile
import unittest

from gdbtest import GdbTestCase, Server, is_stock_gdbserver, program, require, run_gdb, server_path

NOTICE = r"gdbtrace: no in-kernel collector \(.*eBPF: .*Operation not permitted.*\), so tracepoints " \
         r"are collected with ptrace.*run gdbtrace-server as root or with CAP_BPF and CAP_PERFMON"


def unprivileged_server_binary(tmpdir):
    """A wrapper that starts the real server with the BPF-related capabilities out of reach."""
    path = os.path.join(tmpdir, "gdbtrace-server-nocaps")
    with open(path, "w") as f:
        f.write("#!/bin/sh\nexec setpriv --bounding-set=-bpf,-perfmon,-sys_admin "
                f"{server_path()} \"$@\"\n")
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return path


class Fallback(GdbTestCase):
    def setUp(self):
        require(self, not is_stock_gdbserver(), "gdbtrace-server only")
        require(self, os.geteuid() == 0 and shutil.which("setpriv") is not None,
                "needs root and setpriv to drop capabilities")
        self.tmpdir = tempfile.mkdtemp(prefix="gdbtrace-fallback-")

    def test_notice_at_tstart_and_in_status(self):
        server = Server("once", program=program("trace_loop"), args=(3,),
                        binary=unprivileged_server_binary(self.tmpdir))
        try:
            run = run_gdb(["break done", "trace probe_me", "actions", "collect $rdi", "end",
                           "trace step_me", "tstart", "continue", "tstop", "tstatus",
                           "monitor gdbtrace status", "maint packet qGdbtrace.status"],
                          program="trace_loop", server=server)
        finally:
            server.stop()
        # gdb prints console text on stderr, its own on stdout: no order between the two.
        self.assertOutput(run, r"Breakpoint 1, done")
        self.assertOutput(run, r"Collected 6 trace frames")
        self.assertOutput(run, r"^fallback: no in-kernel collector")
        self.assertOutput(run, r"tracepoint 2 at 0x[0-9a-f]+: backend ptrace, hits 3")
        # Once per run, not once per tracepoint.
        self.assertEqual(len(re.findall(NOTICE, run.output)), 1, run.transcript())
        reply = re.search(r'received: "([0-9a-f]+)"', run.output)
        self.assertTrue(reply, run.transcript())
        status = json.loads(bytes.fromhex(reply.group(1)).decode())
        self.assertIn("Operation not permitted", status["fallback"])

    def test_no_notice_with_an_in_kernel_collector(self):
        run = run_gdb(["break done", "trace probe_me", "tstart", "continue",
                       "monitor gdbtrace status", "maint packet qGdbtrace.status"],
                      program="trace_loop", args=(2,))
        require(self, "backend ptrace" not in run.output, "no in-kernel collector on this machine")
        self.assertNoOutput(run, r"no in-kernel collector")
        reply = re.search(r'received: "([0-9a-f]+)"', run.output)
        self.assertEqual(json.loads(bytes.fromhex(reply.group(1)).decode())["fallback"], "")


if __name__ == "__main__":
    unittest.main()
