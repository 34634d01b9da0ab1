"""Attach to a running process (gdbserver --attach, and `attach PID` over extended-remote), detach
(the process must keep running, untraced), and reconnecting to a server that outlives gdb."""

import os
import tempfile
import time
import unittest
from pathlib import Path

from gdbtest import (GdbTestCase, Server, Tracee, descendants, kill_new_processes, process_state,
                     program, run_gdb, tracer_pid)


class Heartbeat:
    """A `loop` tracee writing its tick count to a file, to tell running from stopped."""

    def __init__(self):
        self.dir = tempfile.TemporaryDirectory(prefix="gdbtest-attach-")
        self.path = Path(self.dir.name) / "heartbeat"
        self.tracee = Tracee(program("loop"), args=(str(self.path), 120))
        deadline = time.time() + 5
        while not self.path.exists() and time.time() < deadline:
            time.sleep(0.02)

    def ticks(self) -> int:
        try:
            return int(self.path.read_text().strip() or 0)
        except (OSError, ValueError):
            return -1

    def advancing(self, seconds=0.5) -> bool:
        first = self.ticks()
        time.sleep(seconds)
        return self.ticks() > first

    def close(self):
        self.tracee.kill()
        self.dir.cleanup()


class Attach(GdbTestCase):
    def setUp(self):
        self.before = descendants()
        self.loop = Heartbeat()
        self.assertTrue(self.loop.advancing(), "loop program is not running")

    def tearDown(self):
        self.loop.close()
        kill_new_processes(self.before)

    def assertRunningUntraced(self, run):
        state = process_state(self.loop.tracee.pid)
        if state in ("", "Z", "X") or tracer_pid(self.loop.tracee.pid) != 0 or not self.loop.advancing():
            self.fail(f"process {self.loop.tracee.pid} not running freely after detach (state {state!r}, "
                      f"tracer {tracer_pid(self.loop.tracee.pid)})\n{run.transcript()}")

    def test_server_attach_then_detach(self):
        with Server("attach", pid=self.loop.tracee.pid) as server:
            self.assertFalse(self.loop.advancing(0.3), "process still runs while the stub is attached")
            run = run_gdb(["bt", "print ticks > 0", "info threads", "detach"], program="loop",
                          server=server)
            self.assertOrdered(run, [r"#\d+ .*main \(argc=3", r"\$1 = 1",
                                     r"Thread \S+ .*\"loop\"",
                                     r"\[Inferior 1 \(process \d+\) detached\]"])
            self.assertRunningUntraced(run)

    def test_extended_remote_attach_command_then_detach(self):
        with Server("multi") as server:
            run = run_gdb([f"attach {self.loop.tracee.pid}", "break tick", "continue", "bt 2",
                           "print ticks > 0", "delete", "detach", "info inferiors"],
                          program="loop", server=server)
            self.assertOrdered(run, [r"Breakpoint 1, tick \(\)",
                                     r"#1  0x[0-9a-f]+ in main",
                                     r"\$1 = 1",
                                     rf"\[Inferior 1 \(process {self.loop.tracee.pid}\) detached\]"])
            self.assertRunningUntraced(run)
            self.assertTrue(server.alive(), "--multi server exited after detach")

    def test_attach_detach_attach_again(self):
        with Server("multi") as server:
            for _ in range(2):
                run = run_gdb([f"attach {self.loop.tracee.pid}", "print ticks > 0", "detach"],
                              program="loop", server=server)
                self.assertOrdered(run, [r"\$1 = 1", r"detached"])
                self.assertRunningUntraced(run)

    def test_quit_while_attached_detaches(self):
        # gdb's quit after `attach` detaches (it never kills a process it did not start).
        with Server("multi") as server:
            run = run_gdb([f"attach {self.loop.tracee.pid}", "print ticks > 0"], program="loop",
                          server=server)
            self.assertOutput(run, r"\$1 = 1")
            time.sleep(0.3)
            self.assertRunningUntraced(run)

    def test_harness_attach_mode(self):
        run = run_gdb(["print ticks >= 0", "detach"], program="loop", mode="attach", args=("-", 30))
        self.assertOrdered(run, [r"\$1 = 1", r"detached"])


class Reconnect(GdbTestCase):
    def test_disconnect_and_reconnect_to_multi_server(self):
        before = descendants()
        try:
            with Server("multi") as server:
                first = run_gdb(["break step_particle", "run", "print tick", "disconnect"],
                                program="demo", args=(5, 0), mode="multi", server=server)
                self.assertOrdered(first, [r"Breakpoint 1, step_particle", r"\$1 = 0"])
                # gdb runs with `set remote exec-file` only on the first connection; reconnecting finds
                # the process the server kept, stopped where the first session left it.
                second = run_gdb(["info threads", "print tick", "delete", "continue"],
                                 program="demo", server=server)
                self.assertOrdered(second, [r"step_particle", r"\$1 = 0", r"exited normally"])
                self.assertServerLog(second, r"demo done: 5 steps")
        finally:
            kill_new_processes(before)

    def test_once_server_exits_after_gdb_quits(self):
        with Server("once", program=program("loop"), args=("-", 30)) as server:
            run = run_gdb(["kill"], program="loop", server=server)
            server.proc.wait(timeout=10)
            self.assertFalse(server.alive(), "--once server still running after gdb disconnected\n"
                             + run.transcript())

    def test_monitor_exit_stops_multi_server(self):
        with Server("multi") as server:
            run = run_gdb(["monitor exit"], server=server)
            try:
                server.proc.wait(timeout=10)
            except Exception:
                pass
            self.assertFalse(server.alive(), "server still running after `monitor exit`\n" + run.transcript())


class AttachIntoSignal(GdbTestCase):
    """gdb.threads/attach-into-signal.exp without threads: attaching while a SIGALRM is pending. The
    attach's stop reports that signal ("received signal SIGALRM", as gdbserver's), and `detach` hands it
    back (gdb passes SIGALRM by default), so the program's chain of SIGALRMs, which aborts the moment
    one is lost, runs on after every detach."""

    def test_attach_reports_the_pending_signal_and_detach_passes_it_on(self):
        before = descendants()
        tracee = Tracee(program("signal_chain"))
        try:
            time.sleep(0.2)
            pid = tracee.pid
            # The attach's stop is printed, not returned by gdb.execute: count stop events.
            loop = "\n".join([
                "caught = [0]",
                "def on_stop(ev):",
                "    if isinstance(ev, gdb.SignalEvent) and ev.stop_signal == 'SIGALRM':",
                "        caught[0] += 1",
                "gdb.events.stop.connect(on_stop)",
                "for attempt in range(200):",
                f"    gdb.execute('attach {pid}', to_string=True)",
                "    gdb.execute('detach', to_string=True)",
                "    if caught[0] == 2:",
                "        break",
                "print('caught %d in %d attaches' % (caught[0], attempt + 1))",
            ])
            with Server("multi") as server:
                run = run_gdb(["handle SIGALRM stop print pass", f"python\n{loop}\nend"],
                              program=program("signal_chain"), server=server, timeout=240)
            self.assertOutput(run, r"caught 2 in \d+ attaches")
            time.sleep(0.3)
            self.assertIn(process_state(pid), ("R", "S"), "the SIGALRM chain broke (abort)")
            self.assertEqual(tracer_pid(pid), 0)
        finally:
            tracee.kill()
            kill_new_processes(before)


if __name__ == "__main__":
    unittest.main()
