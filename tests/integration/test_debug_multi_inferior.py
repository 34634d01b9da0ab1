"""Several inferiors on one extended-remote connection (add-inferior, inferior N, run in each, kill
inferiors, detach inferiors, remove-inferiors), three or more at a time, in all-stop, all-stop over
a non-stop target (`maint set target-non-stop on`, what gdb.multi's tests use) and non-stop; the
same tests pass against stock gdbserver (GDBTRACE_SERVER=/usr/bin/gdbserver).

What they pin down (gdb.multi/multi-exit.exp, multi-kill.exp, attach-while-running.exp,
attach-no-multi-process.exp, multi-term-settings.exp):
- when inferiors end one after another, gdb's stop request for a process that has already ended
  is answered OK (its exit follows), never "E.no process" ("Stopping Thread N failed");
- `info inferiors`, `inferior N` and `continue` stay right after each exit or kill;
- a non-stop attach reports its threads only when gdb asks them to stop (gdb reads the target
  description in between; an earlier report is parsed with the wrong architecture: "Remote
  register badly formatted"), so `info threads` and reading a global work right after it;
- a program the stub starts gets the stub's terminal as its foreground process group (no SIGTTOU
  when it sets terminal modes), and ^C stops the inferiors with SIGINT.
Pure all-stop is left out where processes end during a `continue`: gdbserver does not stop the
other processes then, and gdb fails to read their registers ("PC register is not available")."""

import fcntl
import os
import pty
import re
import subprocess
import tempfile
import termios
import threading
import time
import unittest

from gdbtest import (GdbTestCase, MiSession, Server, Tracee, descendants, free_port, is_stock_gdbserver,
                     kill_new_processes, program, run_gdb, server_path, tracer_pid)

INFERIORS = 3
TARGET_NON_STOP = ("-ex", "maint set target-non-stop on")
NON_STOP = ("-ex", "set non-stop on")
NO_ERRORS = r"(?i)Stopping .* failed|E\.no process|internal.error|badly formatted"


def start_inferiors(prog, count=INFERIORS, args=(), stop_at="main"):
    """gdb commands: COUNT inferiors of PROG (a path), each run to STOP_AT (as gdb.multi's tests:
    add-inferior, inferior N, file, set remote exec-file, run)."""
    cmds = []
    for num in range(1, count + 1):
        if num > 1:
            cmds += ["add-inferior", f"inferior {num}"]
        cmds += [f"file {prog}", f"set remote exec-file {prog}"]
        if num == 1:
            cmds.append(f"break {stop_at}")  # each later `file` adds a location
        if args:
            cmds.append("set args " + " ".join(str(a) for a in args))
        cmds.append("run")
    return cmds + ["delete"]


# gdb python: continue a live inferior until every inferior has ended (the test's `continue` of
# gdb.multi/multi-exit.exp and multi-kill.exp), printing what it picked. Switching to an inferior
# whose exit gdb holds but has not reported yet fails to read its registers (with gdbserver:
# "remote failure reply 'E01'"); gdb.multi's tests let that pass, and so does this.
CONTINUE_UNTIL_ALL_ENDED = """python
for round in range({count}):
    live = [inf.num for inf in gdb.inferiors() if inf.pid]
    print("LIVE", round, live)
    if not live:
        break
    try:
        gdb.execute("inferior %d" % live[0])
    except gdb.error as e:
        print("SWITCH", e)
    gdb.execute("continue")
end"""


class ExitOneAfterAnother(GdbTestCase):
    """gdb.multi/multi-exit.exp: INFERIORS processes at main, schedule-multiple on, all exit at
    once. gdb reports one exit per `continue`; after each it stops the others, whose processes may
    already be gone."""

    def check(self, gdb_args):
        hello = program("hello")
        run = run_gdb(start_inferiors(hello) + ["set schedule-multiple on", "info inferiors",
                                                CONTINUE_UNTIL_ALL_ENDED.format(count=INFERIORS + 1),
                                                "info inferiors"] +
                      [c for num in range(1, INFERIORS + 1) for c in (f"inferior {num}", "run")] +
                      ["info inferiors"],
                      mode="multi", gdb_args=gdb_args, timeout=90)
        self.assertNoOutput(run, NO_ERRORS)
        ended = re.findall(r"\[Inferior (\d) \(process \d+\) exited with code 01\]", run.stdout)
        # One exit per `continue`, each inferior once; then each re-run exits again.
        self.assertEqual(sorted(ended[:INFERIORS]), [str(n) for n in range(1, INFERIORS + 1)],
                         run.transcript())
        self.assertEqual(len(ended), 2 * INFERIORS, run.transcript())
        self.assertOutput(run, rf"^LIVE {INFERIORS} \[\]$")
        tables = re.findall(r"  Num  Description.*\n((?:[ *] \d.*\n)+)", run.stdout)
        self.assertEqual(len(tables), 3, run.transcript())
        self.assertEqual(len(re.findall(r"process \d+", tables[0])), INFERIORS, run.transcript())
        for table in tables[1:]:
            self.assertNotIn("process", table, run.transcript())

    def test_all_stop_over_non_stop_target(self):
        self.check(TARGET_NON_STOP)


class KilledFromOutside(GdbTestCase):
    """gdb.multi/multi-kill.exp: INFERIORS running processes, all SIGKILLed from outside during one
    `continue`: each later `continue` reports the next one's SIGKILL."""

    KILL_DURING_CONTINUE = """python
import os, threading
pids = [inf.pid for inf in gdb.inferiors()]
threading.Timer(1.0, lambda: [os.kill(pid, 9) for pid in pids]).start()
gdb.execute("continue")
end"""

    def check(self, gdb_args):
        loop = program("loop")
        run = run_gdb(start_inferiors(loop, args=("-", 60)) +
                      ["set schedule-multiple on", self.KILL_DURING_CONTINUE, "info inferiors",
                       CONTINUE_UNTIL_ALL_ENDED.format(count=INFERIORS), "info inferiors"],
                      mode="multi", gdb_args=gdb_args, timeout=90)
        self.assertNoOutput(run, NO_ERRORS)
        self.assertEqual(len(re.findall(r"Program terminated with signal SIGKILL", run.stdout)),
                         INFERIORS, run.transcript())
        self.assertOutput(run, rf"^LIVE {INFERIORS - 1} \[\]$")
        tables = re.findall(r"  Num  Description.*\n((?:[ *] \d.*\n)+)", run.stdout)
        self.assertEqual(len(re.findall(r"process \d+", tables[-2])), INFERIORS - 1, run.transcript())
        self.assertNotIn("process", tables[-1], run.transcript())

    def test_all_stop_over_non_stop_target(self):
        self.check(TARGET_NON_STOP)


def inferior_rows(run):
    """The rows of each `info inferiors` table in RUN's output: [{num: description}, ...]."""
    tables = re.findall(r"  Num  Description.*\n((?:[ *] \d.*\n)+)", run.stdout)
    return [dict(re.findall(r"^[ *] (\d+)\s+(process \d+|<null>)", t, re.M)) for t in tables]


class KillDetachRemove(GdbTestCase):
    """`kill inferiors`, `detach inferiors` and `remove-inferiors` on one of INFERIORS processes:
    `info inferiors` shows exactly that one gone, and the others still switch, read and run."""

    # The detached process's state and tracer, read while gdb still runs (the harness kills the
    # processes a run started when it ends).
    PROCESS_STATUS = """python
status = open("/proc/%d/status" % int(gdb.convenience_variable("detached"))).read()
print("DETACHED-STATUS", status.split("State:")[1].split()[0], status.split("TracerPid:")[1].split()[0])
end"""

    def check(self, gdb_args):
        loop = program("loop")
        run = run_gdb(start_inferiors(loop, count=INFERIORS + 1, args=("-", 60)) +
                      ["info inferiors", "kill inferiors 2", "info inferiors",
                       "inferior 3", "print ticks", "print $_inferior",
                       "python print('DETACHED', gdb.selected_inferior().pid)",
                       "python gdb.set_convenience_variable('detached', gdb.selected_inferior().pid)",
                       "detach inferiors 3", "info inferiors", self.PROCESS_STATUS, "inferior 1", "remove-inferiors 2 3",
                       "info inferiors", "inferior 4", "break tick", "continue", "print $_inferior",
                       "inferior 1", "continue", "print $_inferior", "kill inferiors 1 4",
                       "info inferiors"],
                      mode="multi", gdb_args=gdb_args, timeout=90)
        self.assertNoOutput(run, NO_ERRORS)
        m = re.search(r"^DETACHED (\d+)$", run.stdout, re.M)
        self.assertIsNotNone(m, run.transcript())
        detached = int(m.group(1))
        tables = inferior_rows(run)
        self.assertEqual(len(tables), 5, run.transcript())
        first, killed, after_detach, removed, end = tables
        live = {str(n) for n in range(1, INFERIORS + 2)}
        self.assertEqual({n for n, d in first.items() if d != "<null>"}, live, run.transcript())
        self.assertEqual({n for n, d in killed.items() if d != "<null>"}, live - {"2"},
                         run.transcript())
        self.assertEqual({n for n, d in after_detach.items() if d != "<null>"}, {"1", "4"},
                         run.transcript())
        self.assertEqual(after_detach["3"], "<null>", run.transcript())
        self.assertEqual(sorted(removed), ["1", "4"], run.transcript())
        self.assertEqual(set(end.values()), {"<null>"}, run.transcript())
        self.assertOrdered(run, [r"^\$1 = \d+", r"^\$2 = 3",
                                 rf"\[Inferior 3 \(process {detached}\) detached\]",
                                 r"Breakpoint 2(\.\d)?, tick", r"^\$3 = 4",
                                 r"Breakpoint 2(\.\d)?, tick", r"^\$4 = 1"])
        # The detached process runs on, traced by nobody.
        self.assertOutput(run, r"^DETACHED-STATUS [RS] 0$")

    def test_all_stop(self):
        self.check(())

    def test_all_stop_over_non_stop_target(self):
        self.check(TARGET_NON_STOP)

    def test_non_stop(self):
        self.check(NON_STOP)


class AttachWhileAnotherRuns(GdbTestCase):
    """gdb.multi/attach-while-running.exp and attach-no-multi-process.exp with more inferiors, in
    MI (gdb's event loop runs all along, as in a front end): inferior 1 runs, two multithreaded
    programs are attached as inferiors 2 and 3. Every attached thread is listed stopped, and
    globals of each inferior read right, the running one's too."""

    def check(self, setup, non_stop):
        loop, threads = program("loop"), program("threads")
        before = descendants()
        second, third = Tracee(threads, args=(4, 60)), Tracee(threads, args=(4, 60))
        time.sleep(0.5)  # past the barrier: five threads each
        try:
            with Server("multi") as server, MiSession(loop, server) as mi:
                for command in ["-gdb-set mi-async on"] + setup:
                    self.assertEqual(mi.send(command).cls, "done", mi.transcript[-5:])
                self.assertEqual(mi.send(f"-target-select extended-remote {server.address}").cls,
                                 "connected")
                mi.send(f"-gdb-set remote exec-file {loop}")
                mi.send("-exec-arguments - 60")
                self.assertEqual(mi.send("-exec-run").cls, "running")
                time.sleep(0.5)  # into its loop: ticks > 0
                for num, tracee in ((2, second), (3, third)):
                    mi.send("-add-inferior")
                    mi.send(f'-interpreter-exec console "inferior {num}"')
                    # No `file`: gdb takes the program from the process (qXfer:exec-file) and
                    # knows its architecture only then (attach-while-running.exp).
                    mark = len(mi.records)
                    rec = mi.send(f"-target-attach {tracee.pid}")
                    self.assertEqual(rec.cls, "done", "\n".join(mi.transcript[-30:]))
                    # non-stop: one *stopped per thread; all-stop: one for the process.
                    for _ in range(5 if non_stop else 1):
                        mark = mi.records.index(mi.wait_stopped(mark)) + 1
                time.sleep(0.5)
                self.assertNotRegex("\n".join(mi.transcript), NO_ERRORS)
                listed = mi.send("-thread-info").results["threads"]
                for tracee in (second, third):
                    mine = [t for t in listed if f"Thread {tracee.pid}." in t.get("target-id", "")]
                    self.assertEqual(len(mine), 5, listed)
                    self.assertEqual({t["state"] for t in mine}, {"stopped"}, mine)
                    self.assertTrue(all("frame" in t for t in mine), mine)
                ours = [t for t in listed if not any(f"Thread {x.pid}." in t.get("target-id", "")
                                                     for x in (second, third))]
                # (An all-stop attach stops every inferior; in non-stop inferior 1 runs on.)
                self.assertEqual([t["state"] for t in ours], ["running" if non_stop else "stopped"],
                                 listed)
                values = {}
                for num in (3, 2, 1):
                    mi.send(f'-interpreter-exec console "inferior {num}"')
                    expr = "ticks > 0" if num == 1 else "busy_seconds"
                    values[num] = mi.send(f"-data-evaluate-expression \"{expr}\"").results
                self.assertEqual(values, {3: {"value": "60"}, 2: {"value": "60"},
                                          1: {"value": "1"}}, "\n".join(mi.transcript[-40:]))
                for num in (2, 3):
                    self.assertEqual(mi.send(f"-target-detach i{num}").cls, "done")
            for tracee in (second, third):
                self.assertEqual(tracer_pid(tracee.pid), 0, "still traced after detach")
                self.assertIsNone(tracee.proc.poll(), "ended by the detach")
        finally:
            second.kill()
            third.kill()
            kill_new_processes(before)

    def test_all_stop_over_non_stop_target(self):
        self.check(['-interpreter-exec console "maint set target-non-stop on"'], False)

    def test_non_stop(self):
        self.check(["-gdb-set non-stop on"], True)


class StartupFailure(GdbTestCase):
    """A program that cannot be started (no such file; with and without a shell): gdb says at once
    that running it failed, in the console and as MI's ^error (a front end waits on nothing), and
    the session goes on: the next `run` of a real program in it works. Word for word what stock
    gdbserver 13 gives."""

    MISSING = "/nonexistent/prog"

    def run_missing(self, shell, after=()):
        with Server("multi") as server:
            return run_gdb([f"set startup-with-shell {shell}", f"target extended-remote {server.address}",
                            f"set remote exec-file {self.MISSING}", "run", "info inferiors"] + list(after),
                           server=server, connect=False)

    def test_console(self):
        for shell in ("on", "off"):
            run = self.run_missing(shell)
            self.assertOutput(run, rf'^Running "{self.MISSING}" on the remote target failed$')
            self.assertOutput(run, r"^\* 1 +<null> ")

    @unittest.skipIf(is_stock_gdbserver(), "stock gdbserver 13 loses the session here: gdb then says "
                     "\"Unknown remote qXfer reply: OK\" and the connection ends")
    def test_session_goes_on(self):
        run = self.run_missing("on", [f"set remote exec-file {program('hello')}", "run"])
        self.assertOutput(run, r"^\[Inferior 1 \(process \d+\) exited with code 01\]$")  # hello, no args

    def test_mi_reports_the_failure_at_once(self):
        with Server("multi") as server, MiSession(program("hello"), server) as mi:
            self.assertEqual(mi.send(f"-target-select extended-remote {server.address}").cls, "connected")
            mi.send(f"-gdb-set remote exec-file {self.MISSING}")
            rec = mi.send("-exec-run")
            self.assertEqual(rec.cls, "error", mi.transcript[-10:])
            self.assertEqual(rec.results.get("msg"), f'Running "{self.MISSING}" on the remote target failed')


class ServerOnTerminal:
    """`SERVER --multi :PORT` in a session of its own whose controlling terminal (stdin, stdout,
    stderr) is a new pseudo-terminal, as when run from a shell; .output() is what was written
    there (the server's messages and its programs' output)."""

    def __init__(self):
        master, slave = pty.openpty()
        self.port = free_port()
        self.proc = subprocess.Popen(
            [server_path(), "--multi", f":{self.port}"], stdin=slave, stdout=slave, stderr=slave,
            start_new_session=True, cwd=tempfile.gettempdir(),
            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
        os.close(slave)
        self.master, self.chunks = master, []
        threading.Thread(target=self._read, daemon=True).start()
        deadline = time.time() + 15
        while "Listening on port" not in self.output() and time.time() < deadline:
            time.sleep(0.05)

    def _read(self):
        while True:
            try:
                data = os.read(self.master, 4096)
            except OSError:
                return
            if not data:
                return
            self.chunks.append(data.decode(errors="replace"))

    def output(self) -> str:
        return "".join(self.chunks)

    @property
    def address(self) -> str:
        return f":{self.port}"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        os.close(self.master)


class TerminalWithSeveralInferiors(GdbTestCase):
    """gdb.multi/multi-term-settings.exp (run one, attach the others), with three inferiors: the
    program the stub starts is the foreground process group of the stub's terminal, so setting
    the terminal's modes does not stop it with SIGTTOU while it and the attached ones run; ^C
    then stops them with SIGINT."""

    def test_run_one_attach_two_continue_interrupt(self):
        term_loop = program("term_loop")
        before = descendants()
        server = ServerOnTerminal()
        # Each in a process group of its own, as a program started from a shell (gdbserver's ^C
        # signals the group of the process attached last).
        attached = [subprocess.Popen([term_loop], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     start_new_session=True) for _ in range(2)]
        try:
            self.assertIn("Listening on port", server.output())
            with MiSession(term_loop, server) as mi:
                mi.send("-gdb-set mi-async on")
                self.assertEqual(mi.send(f"-target-select extended-remote {server.address}").cls,
                                 "connected")
                mi.send(f"-gdb-set remote exec-file {term_loop}")
                mi.send("-break-insert main")
                stop = mi.run_to_breakpoint("-exec-run")
                mi.send("-break-delete")
                started = int(mi.send("-data-evaluate-expression $_inferior").results["value"])
                pid = mi.send('-data-evaluate-expression "(int) getpid()"').results["value"]
                for num, tracee in enumerate(attached, start=2):
                    mi.send("-add-inferior")
                    mi.send(f'-interpreter-exec console "inferior {num}"')
                    mark = len(mi.records)
                    self.assertEqual(mi.send(f"-target-attach {tracee.pid}").cls, "done")
                    mi.wait_stopped(mark)
                mi.send("-gdb-set schedule-multiple on")
                written = len(server.output())
                mark = len(mi.records)
                self.assertEqual(mi.send("-exec-continue").cls, "running")
                time.sleep(1.5)
                stops = [r.line for r in mi.records[mark:] if r.kind == "*" and r.cls == "stopped"]
                self.assertEqual(stops, [], "stopped while all ran (SIGTTOU?)\n" +
                                 "\n".join(mi.transcript[-30:]))
                counts = re.findall(rf"pid={pid}, count=", server.output()[written:])
                self.assertGreaterEqual(len(counts), 3, server.output()[written:])
                mi.send("-exec-interrupt")
                stop = mi.wait_stopped(mark)
                self.assertEqual(stop.results.get("signal-name"), "SIGINT", stop.line)
                self.assertEqual(started, 1)
        finally:
            for tracee in attached:
                tracee.kill()
                tracee.wait()
            server.stop()
            kill_new_processes(before)


if __name__ == "__main__":
    unittest.main()
