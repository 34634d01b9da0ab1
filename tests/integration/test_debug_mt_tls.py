"""Thread-local variables (qGetTLSAddr, answered through libthread_db as gdbserver does): the
selected thread's copy of a __thread variable in the executable and in a shared library, with and
without debug info, and a clear error before the program's libc has set up threads."""

import unittest

from gdbtest import GdbTestCase, run_gdb

PER_THREAD = ["break tls_marker", "continue",
              "thread 2", "printf \"t2 exe=%d lib=%d\\n\", {exe}, {lib}",
              "thread 3", "printf \"t3 exe=%d lib=%d\\n\", {exe}, {lib}",
              "thread 1", "printf \"t1 exe=%d lib=%d\\n\", {exe}, {lib}",
              "delete", "continue"]


class ThreadLocalVariables(GdbTestCase):
    def _check_per_thread(self, run):
        # Workers set 100+i / 600+i; the main thread keeps the initial 7 / 500.
        self.assertOutput(run, r"^t2 exe=(100 lib=600|101 lib=601)$")
        self.assertOutput(run, r"^t3 exe=(100 lib=600|101 lib=601)$")
        t2 = run.output.split("t2 exe=")[1][:3]
        t3 = run.output.split("t3 exe=")[1][:3]
        self.assertNotEqual(t2, t3, "both threads show the same copy\n" + run.transcript())
        self.assertOutput(run, r"^t1 exe=7 lib=500$")
        self.assertOutput(run, r"exited normally")

    def test_tls_with_debug_info(self):
        commands = [c.format(exe="exe_tls", lib="lib_tls") for c in PER_THREAD]
        run = run_gdb(commands, program="mt_tls_uses_libtlsvar")
        self._check_per_thread(run)
        self.assertServerLog(run, r"mt_tls done: exe_tls 7")

    def test_tls_without_debug_info(self):
        commands = [c.format(exe="(int) exe_tls", lib="(int) lib_tls") for c in PER_THREAD]
        run = run_gdb(commands, program="mt_tls_nodebug_uses_libtlsvar")
        self._check_per_thread(run)

    def test_tls_address_differs_per_thread(self):
        run = run_gdb(["break tls_marker", "continue", "thread 2", "print &exe_tls", "print &lib_tls",
                       "thread 1", "print &exe_tls", "print &lib_tls", "print $3 != $1",
                       "print $4 != $2"],
                      program="mt_tls_uses_libtlsvar")
        self.assertOutput(run, r"^\$1 = \(int \*\) 0x[0-9a-f]+")
        self.assertOutput(run, r"^\$5 = 1$")
        self.assertOutput(run, r"^\$6 = 1$")

    def test_tls_before_threads_exist_is_an_error(self):
        """At the first instruction libc has not set up its thread data: gdb gets an error reply
        and says so (gdbserver answers the same), nothing crashes, and it works later."""
        run = run_gdb(["print exe_tls", "break tls_marker", "continue", "print exe_tls",
                       "delete", "continue"],
                      program="mt_tls_uses_libtlsvar")
        # (the error goes to stderr, so it is not ordered with the rest)
        self.assertOutput(run, r"Cannot find thread-local storage for Thread")
        self.assertOrdered(run, [r"^\$1 = 10[01]$", r"exited normally"])

    def test_tls_mi(self):
        run = run_gdb(["-break-insert tls_marker", "-exec-continue",
                       "-data-evaluate-expression exe_tls", "-data-evaluate-expression lib_tls",
                       "-thread-select 1", "-data-evaluate-expression exe_tls",
                       "-data-evaluate-expression lib_tls"],
                      program="mt_tls_uses_libtlsvar", mi=True)
        self.assertOutput(run, r'\^done,value="10[01]"')
        self.assertOutput(run, r'\^done,value="60[01]"')
        self.assertOutput(run, r'\^done,value="7"')
        self.assertOutput(run, r'\^done,value="500"')


if __name__ == "__main__":
    unittest.main()
