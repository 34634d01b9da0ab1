"""gdb.server parity with gdbserver: `info os` (qXfer:osdata, the tables of gdb/nat/linux-osdata.c),
`monitor set debug-format`, `monitor set libthread-db-search-path` (thread-local variables fail
with gdb's own message when no libthread_db can be loaded, and work again after the path is reset),
attaching with --attach to a process with many threads (gdb.server/attach-flag.exp)."""

import os
import re
import unittest

from gdbtest import GdbTestCase, Server, require, run_gdb

STOCK = "/usr/bin/gdbserver"


class InfoOs(GdbTestCase):
    def test_types_and_process_tables(self):
        run = run_gdb(["break main", "continue", "info os", "info os processes", "info os threads",
                       "info os procgroups", "info os files", "info os sockets", "info os cpus",
                       "info os modules", "info os msg", "info os shm", "info os semaphores",
                       "info inferiors", "info os nosuchtype"],
                      program="threads", args=(2,))
        for row in [r"^cpus\s+Listing of all cpus/cores on the system", r"^files\s+Listing of all file",
                    r"^processes\s+Listing of all processes", r"^procgroups\s+Listing of all process groups",
                    r"^sockets\s+Listing of all internet-domain sockets", r"^threads\s+Listing of all threads",
                    r"^modules\s+Listing of all loaded kernel modules", r"^shm\s+Listing of all shared-memory"]:
            self.assertOutput(run, row)
        m = re.search(r"process (\d+)", run.output)
        self.assertIsNotNone(m, run.transcript())
        pid = m.group(1)
        # Column headers in gdbserver's order, and the inferior's own rows.
        self.assertOutput(run, r"^pid\s+user\s+command\s+cores")
        self.assertOutput(run, rf"^{pid}\s+\S+\s+\S*/threads 2\s+\d")
        self.assertOutput(run, r"^pid\s+command\s+tid\s+core")
        self.assertOutput(run, rf"^{pid}\s+threads\s+{pid}\s+-?\d+")
        self.assertOutput(run, r"^pgid\s+leader command\s+pid\s+command line")
        self.assertOutput(run, r"^pid\s+command\s+file descriptor\s+name")
        self.assertOutput(run, rf"^{pid}\s+threads\s+0\s+\S+")
        # The stub's own listening/connected socket is in the socket table.
        self.assertOutput(run, r"^local address\s+local port\s+remote address\s+remote port\s+state")
        self.assertOutput(run, r"ESTABLISHED\s+\S*\s+INET6?\s+STREAM")
        self.assertOutput(run, r"processor\s+vendor_id")
        # An unknown type is an empty document, as from gdbserver (gdb warns).
        self.assertOutput(run, r"Empty data returned by target\.  Wrong osdata type\?")

    def test_same_tables_as_gdbserver(self):
        """The type list is identical to gdbserver's, and every table has its column headers."""
        require(self, os.path.exists(STOCK), "no stock gdbserver to compare with")
        commands = ["info os"] + [f"info os {t}" for t in ("cpus", "files", "processes", "procgroups",
                                                              "sockets", "threads")]
        ours = run_gdb(commands, program="threads", args=(1,))
        from gdbtest import program
        with Server("once", program=program("threads"), args=(1,), binary=STOCK) as srv:
            stock = run_gdb(commands, program="threads", server=srv)
        def types(run):
            return re.findall(r"^(\w+)\s+(Listing of .*?)\s*$", run.stdout, re.M)
        self.assertEqual(types(ours), types(stock), ours.transcript())
        self.assertEqual(len(types(ours)), 10, ours.transcript())
        def headers(run):
            return re.findall(r"^(?:processor|pid|pgid|local address)\s.*$", run.stdout, re.M)
        got = {re.sub(r"\s+", " ", h.strip()) for h in headers(ours)}
        want = {re.sub(r"\s+", " ", h.strip()) for h in headers(stock)}
        self.assertTrue(want <= got, f"missing headers {want - got}\n" + ours.transcript())

    def test_osdata_snapshot_read_in_chunks(self):
        """gdb reads a large table in several qXfer chunks: the pieces must make one well-formed
        document (gdbserver snapshots at offset 0; so do we)."""
        run = run_gdb(["set debug remote 1", "info os threads"], program="threads", args=(1,))
        chunks = re.findall(r"qXfer:osdata:read:threads:([0-9a-f]+),", run.output)
        self.assertGreaterEqual(len(set(chunks)), 2, run.transcript())  # several offsets
        self.assertOutput(run, r"^pid\s+command\s+tid\s+core")
        self.assertNotIn("Invalid XML", run.output, run.transcript())


class MonitorSettings(GdbTestCase):
    def test_debug_format(self):
        run = run_gdb(["monitor set debug-format all", "monitor set debug-format none",
                       "monitor set debug-format timestamp", "monitor set remote-debug 1",
                       "monitor set debug-format bogus", "monitor set debug-format none",
                       "monitor set remote-debug 0", "monitor help"],
                      program="hello")
        self.assertOrdered(run, [r"All extra debug format options enabled\.",
                                 r"All extra debug format options disabled\.",
                                 r"Timestamps will be added to debug output\.",
                                 r"Protocol debug output enabled\.",
                                 r'Unknown debug-format argument: "bogus"',
                                 r"All extra debug format options disabled\.",
                                 r"set debug-format option1\[,option2,\.\.\.\]"])
        # While timestamps were on, the stub's protocol log lines carried them (gdbserver's format).
        self.assertServerLog(run, r"^\d{9,}\.\d{6} \[remote\] getpkt")

    def test_debug_format_option(self):
        run = run_gdb(["monitor set remote-debug 1", "info threads"], program="hello",
                      server_args=("--debug-format=timestamp",))
        self.assertServerLog(run, r"^\d{9,}\.\d{6} \[remote\] ")

    def test_libthread_db_search_path(self):
        """As gdb.server/no-thread-db.exp: without a loadable libthread_db a TLS variable is gdb's
        "Cannot find thread-local storage" error; with the default path back it prints."""
        run = run_gdb(["monitor set libthread-db-search-path /foo/bar", "break tls_marker", "continue",
                       "print exe_tls", "monitor set libthread-db-search-path", "print exe_tls",
                       "monitor set libthread-db-search-path /nonexistent:$sdir", "thread 2",
                       "print lib_tls"],
                      program="mt_tls_uses_libtlsvar")
        # Console text of the stub (monitor) is on gdb's stderr, values on stdout.
        self.assertOrdered(run, [r"libthread-db-search-path set to `/foo/bar'",
                                 r"Cannot find thread-local storage for Thread .*executable file .*"
                                 r"mt_tls_uses_libtlsvar:\s*\nRemote target failed to process "
                                 r"qGetTLSAddr request",
                                 r"libthread-db-search-path set to `\$pdir:\$sdir'",
                                 r"libthread-db-search-path set to `/nonexistent:\$sdir'"])
        # After the default path is back the same variable prints (the failed load is not kept),
        # and a path with a missing directory first still finds the system's library.
        self.assertRegex(run.stdout, r"(?m)^\$1 = \d+\n(.*\n)*\$2 = 60[01]$", run.transcript())


class AttachFlag(GdbTestCase):
    def test_attach_to_eleven_threads(self):
        """gdb.server/attach-flag.exp: `gdbtrace-server --attach` to a process whose ten threads
        already run; gdb sees 11 threads, all-stop and non-stop."""
        for non_stop, target_non_stop in (("off", "off"), ("off", "on"), ("on", "on")):
            # all-stop gdb over a non-stop target stops each thread with vCont;t: threads the
            # attach already stopped must still be reported (gdb waits for them otherwise).
            run = run_gdb(["info threads", "thread 11", "info threads"], program="threads",
                          args=(10, 30), mode="attach", extended=False, timeout=30,
                          gdb_args=("-ex", f"set non-stop {non_stop}",
                                    "-ex", f"maint set target-non-stop {target_non_stop}"))
            self.assertOutput(run, r"Switching to thread 11\b", f"non-stop {non_stop} target-non-stop "
                              f"{target_non_stop}")
            self.assertNotIn("internal-error", run.output, run.transcript())


if __name__ == "__main__":
    unittest.main()
