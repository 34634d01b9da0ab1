"""Threads: listing, per-thread backtraces, switching, thread-specific breakpoints, non-stop mode."""

import unittest

import time

from gdbtest import GdbTestCase, mi_connected, run_gdb


# gdb shows "Thread 0x7ffff7d8a6c0 (LWP 123)" when it can use libthread_db, else "Thread 123.124".
TID = r"Thread (0x[0-9a-f]+ \(LWP \d+\)|\d+\.\d+)"


class Threads(GdbTestCase):
    def test_info_threads_and_backtraces(self):
        run = run_gdb(["break thread_marker", "continue", "info threads", "thread apply all bt",
                       "delete", "continue"],
                      program="threads", args=(4,))
        self.assertOutput(run, r"Thread 1 \"threads\" hit Breakpoint 1, thread_marker|"
                               r"hit Breakpoint 1, thread_marker")
        # 4 workers + main.
        for n in range(1, 6):
            self.assertOutput(run, rf"^\*?\s+{n}\s+{TID}", f"thread {n} missing")
        self.assertOutputs(run, [rf"Thread \d+ \({TID}.*\):\n#0 ", rf"\[New {TID}\]",
                                 r"#\d+\s+0x[0-9a-f]+ in worker \(arg=0x[0-3]\) at .*threads\.c",
                                 r"in main \(argc=2", r"exited normally"])
        self.assertServerLog(run, r"threads done: 4 threads, total 4000006")

    def test_thread_switch_and_thread_local_state(self):
        run = run_gdb(["break thread_marker", "continue", "thread 1", "bt 1", "thread 2", "info frame",
                       "print $_thread", "print $_gthread"],
                      program="threads", args=(2,))
        self.assertOrdered(run, [rf"\[Switching to thread 1 \({TID}\)\]",
                                 r"#0  .*\(",
                                 r"\[Switching to thread 2 ",
                                 r"Stack level 0",
                                 r"\$1 = 2", r"\$2 = 2"])

    def test_thread_specific_breakpoint(self):
        run = run_gdb(["break thread_marker", "continue", "delete", "thread 2", "break worker thread 2",
                       "info breakpoints", "continue"],
                      program="threads", args=(2,))
        self.assertOutput(run, r"stop only in thread 2")
        self.assertOutput(run, r"exited normally")

    def test_scheduler_locking_step(self):
        run = run_gdb(["break thread_marker", "continue", "set scheduler-locking on", "next", "info threads",
                       "set scheduler-locking off", "delete", "continue"],
                      program="threads", args=(2,))
        self.assertOrdered(run, [r"hit Breakpoint 1, thread_marker", r"^worker \(arg=0x[01]\) at .*threads\.c:\d+",
                                 r"^\*\s+\d+\s+Thread .* worker \(arg=0x[01]\)", r"exited normally"])


class NonStop(GdbTestCase):
    """Non-stop mode needs gdb's event loop between commands, so these drive gdb through MI (as an IDE
    does) instead of a -batch script."""

    def test_non_stop_continue_interrupt(self):
        with mi_connected("loop", args=("-", 30), setup=["-gdb-set non-stop on", "-gdb-set mi-async on"]) as c:
            mi = c
            self.assertEqual(mi.send("-break-insert main").cls, "done")
            mark = len(mi.records)
            self.assertEqual(mi.send("-exec-run").cls, "running")
            stop = mi.wait_stopped(mark)
            self.assertEqual(stop.results.get("reason"), "breakpoint-hit", stop.line)
            mi.send("-break-delete")
            mark = len(mi.records)
            self.assertEqual(mi.send("-exec-continue --all").cls, "running")
            mi.wait_for("*", "running", since=mark)
            threads = mi.send("-thread-info").results["threads"]
            self.assertTrue(all(t["state"] == "running" for t in threads), threads)
            time.sleep(0.5)
            mark = len(mi.records)
            self.assertEqual(mi.send("-exec-interrupt --all").cls, "done")
            stop = mi.wait_stopped(mark)
            threads = mi.send("-thread-info").results["threads"]
            self.assertTrue(all(t["state"] == "stopped" for t in threads), threads)
            ticks = mi.send("-data-evaluate-expression ticks")
            self.assertGreater(int(ticks.results["value"]), 0, ticks.line)
            # Resume again and stop again: the stub keeps per-thread state consistent.
            mark = len(mi.records)
            mi.send("-exec-continue --all")
            mi.wait_for("*", "running", since=mark)
            mark = len(mi.records)
            mi.send("-exec-interrupt --all")
            mi.wait_stopped(mark)
            ticks2 = mi.send("-data-evaluate-expression ticks")
            self.assertGreaterEqual(int(ticks2.results["value"]), int(ticks.results["value"]))

    def test_non_stop_cli_commands(self):
        """The CLI spelling (`continue &`, `interrupt`, `info threads`) through MI's console interpreter."""
        with mi_connected("threads", args=(3, 30), setup=["-gdb-set non-stop on", "-gdb-set mi-async on"]) as mi:
            mi.send('-interpreter-exec console "break thread_marker"')
            mi.run_to_breakpoint('-interpreter-exec console "run"')
            mi.send('-interpreter-exec console "delete"')
            time.sleep(0.3)
            mark = len(mi.records)
            mi.send('-interpreter-exec console "info threads"')
            listing = "".join(r.cls for r in mi.records[mark:] if r.kind == "~")
            self.assertRegex(listing, r"\(running\)", listing)  # main is still in pthread_join
            self.assertRegex(listing, r"thread_marker \(index=\d\)", listing)
            # Resume everything in the background, then interrupt everything.
            mark = len(mi.records)
            self.assertEqual(mi.send('-interpreter-exec console "continue -a &"').cls, "running")
            mi.wait_for("*", "running", since=mark)
            mark = len(mi.records)
            mi.send('-interpreter-exec console "interrupt -a"')
            mi.wait_stopped(mark)
            time.sleep(0.3)
            mark = len(mi.records)
            mi.send('-interpreter-exec console "info threads"')
            listing = "".join(r.cls for r in mi.records[mark:] if r.kind == "~")
            self.assertNotRegex(listing, r"\(running\)", listing)
            self.assertRegex(listing, r"(?m)^\*?\s+1\s+Thread", listing)

    def test_non_stop_threads_stop_independently(self):
        with mi_connected("threads", args=(2,), setup=["-gdb-set non-stop on", "-gdb-set mi-async on"]) as mi:
            mi.send("-break-insert thread_marker")
            stop = mi.run_to_breakpoint("-exec-run")
            self.assertEqual(stop.results["frame"]["func"], "thread_marker", stop.line)
            # Only the thread(s) that hit the breakpoint are stopped; main (in pthread_join) still runs.
            time.sleep(0.3)
            threads = mi.send("-thread-info").results["threads"]
            states = {t["id"]: t["state"] for t in threads}
            self.assertIn("running", states.values(), threads)
            self.assertIn("stopped", states.values(), threads)
            stopped = [t for t in threads if t["state"] == "stopped"]
            self.assertTrue(all(t["frame"]["func"] == "thread_marker" for t in stopped), stopped)


if __name__ == "__main__":
    unittest.main()
