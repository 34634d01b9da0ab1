"""The stub's own death mid-trace. With the ptrace collector every trace hit is an int3 the stub
wrote into the tracee: whatever ends the stub (SIGTERM, SIGHUP, SIGINT on a TCP connection, or a
crash such as SIGSEGV), it must take out every int3 (user breakpoints and trace breakpoints),
detach the processes it attached to and leave them running, and kill the ones it started
(gdbserver's rule). No tracee may die of SIGTRAP afterwards. With the eBPF collector a SIGKILL of the
stub must leave the tracee unharmed and no uprobe or BPF link behind.

Tracee: tests/programs/loop.c (tick() every ~10 ms, "loop done: N ticks" at the end)."""

import os
import re
import signal
import subprocess
import tempfile
import threading
import time
import unittest
from pathlib import Path

from gdbtest import (NO_DEBUG_TRAPS, GdbTestCase, Server, Tracee, available_collectors, descendants,
                     kill_new_processes, machine_delivers_debug_traps, process_state, program, require,
                     run_gdb, tracer_pid)

# Trace tick() with the ptrace collector, plus a user breakpoint that is never reached (loop runs
# without a heartbeat file; its int3 must go too), and let the program run: gdb waits in `continue`
# (so its own detach/kill at exit cannot be what saves the tracee) while the test kills the stub.
def session(backend="ptrace", user_breakpoint=True, function="tick", collect="ticks", extra=()):
    return [f"monitor gdbtrace backend {backend}"] + \
        (["break write_heartbeat"] if user_breakpoint else []) + list(extra) + [f"trace {function}",
            "actions", f"collect {collect}", "end", "tstart", "monitor gdbtrace status", "continue"]


class KillLater(threading.Thread):
    """Once the trace is live (the tracee's code holds a probe: polled for up to 60 s, since gdb
    may still be reading libraries under load) and DELAY seconds more have passed, notes the int3s
    in the tracee's code and sends SIG to the stub."""

    def __init__(self, server, sig, tracee_pid, delay=0.5, program_name="loop"):
        super().__init__(daemon=True)
        self.server, self.sig, self.tracee_pid, self.delay = server, sig, tracee_pid, delay
        self.program_name = program_name
        self.int3s_before = None

    def run(self):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if text_int3s(self.tracee_pid(), program(self.program_name)):
                    break
            except (OSError, TypeError):
                pass  # the tracee is not there yet
            time.sleep(0.05)
        time.sleep(self.delay)
        try:
            # A thread stepping over the tracepoint lifts its int3 for an instant: sample a few times.
            for _ in range(20):
                self.int3s_before = text_int3s(self.tracee_pid(), program(self.program_name))
                if self.int3s_before:
                    break
                time.sleep(0.01)
        finally:
            os.kill(self.server.proc.pid, signal.Signals[f"SIG{self.sig}"])


def text_int3s(pid, path):
    """Offsets where the program's executable mapping in memory differs from its file (an int3
    left behind shows up here); [] when they are equal."""
    diffs = []
    maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
    with open(f"/proc/{pid}/mem", "rb") as mem, open(path, "rb") as exe:
        for line in maps:
            fields = line.split()
            if len(fields) < 6 or "x" not in fields[1] or os.path.realpath(fields[5]) != \
                    os.path.realpath(path):
                continue
            start, end = (int(v, 16) for v in fields[0].split("-"))
            offset = int(fields[2], 16)
            mem.seek(start)
            live = mem.read(end - start)
            exe.seek(offset)
            disk = exe.read(len(live))
            diffs += [start + i for i in range(len(disk)) if live[i] != disk[i]]
    return diffs


def wait_exit(proc, timeout):
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


def kill_stub_mid_trace(testcase, server, tracee_pid, sig, commands, program_name):
    """SERVER (debugging TRACEE_PID) killed by SIG while gdb runs COMMANDS, once the trace is live
    (KillLater). Checks that the tracee held probes then and that the stub exited; returns the
    stub's exit status, its log and the text to print on a failure."""
    killer = KillLater(server, sig, lambda: tracee_pid, program_name=program_name)
    killer.start()
    run = run_gdb(commands, program=program_name, server=server, timeout=60)
    killer.join(10)
    rc = wait_exit(server.proc, 10)
    log = server.log()
    details = run.transcript() + "\n--- server log after ---\n" + log
    testcase.assertTrue(killer.int3s_before, "no int3 in the tracee while tracing\n" + details)
    testcase.assertIsNotNone(rc, "the stub did not exit\n" + details)
    return rc, log, details


def assert_loop_ran_to_end(testcase, tracee, details, timeout=30):
    """The `loop` TRACEE, detached, ran to its normal end (exit 0, its closing line)."""
    out, _ = tracee.proc.communicate(timeout=timeout)
    testcase.assertEqual(tracee.proc.returncode, 0, f"tracee ended with {tracee.proc.returncode}\n" + details)
    testcase.assertRegex(out.decode(errors="replace"), r"loop done: [1-9]\d* ticks", details)


class StubSignalled(GdbTestCase):
    def attached_case(self, sig, expect_crash=False, extra=()):
        before = descendants()
        tracee = Tracee(program("loop"), args=("-", 6))
        try:
            time.sleep(0.2)
            with Server("attach", pid=tracee.pid) as server:
                rc, log, details = kill_stub_mid_trace(self, server, tracee.pid, sig, session(extra=extra), "loop")
            # Detached, running, and no int3 left in its code.
            self.assertEqual(tracer_pid(tracee.pid), 0, details)
            self.assertIn(process_state(tracee.pid), ("R", "S"), details)
            self.assertEqual(text_int3s(tracee.pid, program("loop")), [], details)
            assert_loop_ran_to_end(self, tracee, details)
            # Crash or orderly end, the stub ends by the signal it got (re-raised after the cleanup).
            self.assertEqual(rc, -signal.Signals[f"SIG{sig}"].value, details)
            if expect_crash:
                self.assertIn("fatal signal", log, details)
            else:
                self.assertIn("detaching attached processes", log, details)
        finally:
            tracee.kill()
            kill_new_processes(before)

    def started_case(self, sig, expect_crash=False):
        before = descendants()
        try:
            with Server("once", program=program("loop"), args=("-", 60)) as server:
                m = re.search(r"created; pid = (\d+)", server.log())
                self.assertTrue(m, server.log())
                pid = int(m.group(1))
                rc, _log, details = kill_stub_mid_trace(self, server, pid, sig, session(), "loop")
            self.assertEqual(rc, -signal.Signals[f"SIG{sig}"].value, details)
            # Orphaned to us (the test harness is a subreaper): reap it and see how it ended.
            status = None
            deadline = time.time() + 10
            while time.time() < deadline:
                try:
                    waited, status = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    break  # reaped elsewhere: it is gone either way
                if waited == pid:
                    break
                status = None
                time.sleep(0.05)
            self.assertEqual(process_state(pid), "", f"started tracee {pid} still exists\n" + details)
            if status is not None:
                self.assertTrue(os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL,
                                f"tracee ended with status {status:#x}, not SIGKILL\n" + details)
        finally:
            kill_new_processes(before)

    def test_sigterm_attached(self):
        self.attached_case("TERM")

    def test_sigterm_started(self):
        self.started_case("TERM")

    def test_sighup_attached(self):
        self.attached_case("HUP")

    def test_sighup_started(self):
        self.started_case("HUP")

    def test_sigint_attached(self):
        self.attached_case("INT")

    def test_sigint_started(self):
        self.started_case("INT")

    def test_sigsegv_attached(self):
        self.attached_case("SEGV", expect_crash=True)

    def test_sigsegv_started(self):
        self.started_case("SEGV", expect_crash=True)

    def test_sigsegv_attached_hardware_breakpoint(self):
        # gdb's hardware breakpoint in a function the program calls every 10 ms (its condition never
        # true): the crash path must stop the running thread to clear its debug registers, or the
        # detached program dies of SIGTRAP at its next call.
        if not machine_delivers_debug_traps():
            # No debug register is ever set on such a machine: the hbreak is refused, saying why.
            run = run_gdb(["break main", "continue", "hbreak nanosleep", "continue", "delete",
                           "continue"], program="loop", args=("-", 2), extended=False)
            for pattern in (r"Cannot insert hardware breakpoint", NO_DEBUG_TRAPS, r"exited normally"):
                self.assertOutput(run, pattern)
            return
        self.attached_case("SEGV", expect_crash=True, extra=["hbreak nanosleep if ticks < 0"])


class StubSignalledMultithreaded(GdbTestCase):
    """Eight threads hit one ptrace-collector tracepoint: at any instant some are stopped at the
    int3, stepping over it, or have our SIGSTOP pending. Whatever state the stub dies in, every
    call must still run exactly once and the program end normally."""

    def run_case(self, sig, expect_crash):
        before = descendants()
        tracee = Tracee(program("mt_bpstep"), args=(2500, 8))
        try:
            time.sleep(0.2)
            # Circular: a linear buffer fills in about a second at this rate and ends the trace.
            with Server("attach", pid=tracee.pid) as server:
                rc, _log, details = kill_stub_mid_trace(
                    self, server, tracee.pid, sig, ["set circular-trace-buffer on"] +
                    session(user_breakpoint=False, function="hit", collect="index"), "mt_bpstep")
            if expect_crash:
                self.assertEqual(rc, -signal.Signals[f"SIG{sig}"].value, details)
            self.assertEqual(tracer_pid(tracee.pid), 0, details)
            self.assertEqual(text_int3s(tracee.pid, program("mt_bpstep")), [], details)
            try:
                out, _ = tracee.proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                self.fail(f"tracee stuck in state {process_state(tracee.pid)}\n" + details)
            self.assertRegex(out.decode(errors="replace"),
                             r"mt_bpstep done: 20000 calls \(expected 20000\)", details)
            self.assertEqual(tracee.proc.returncode, 0, details)
        finally:
            tracee.kill()
            kill_new_processes(before)

    def test_sigterm(self):
        self.run_case("TERM", expect_crash=False)

    def test_sigsegv(self):
        self.run_case("SEGV", expect_crash=True)


# Walks every frame of the trace: their count and whether the collected `ticks` values are
# consecutive (tick() increments it once per call, so no frame is missing or repeated).
READ_ALL_FRAMES = [
    "python",
    "values = []",
    "try:",
    "    gdb.execute('tfind start', to_string=True)",
    "    for _ in range(1000000):",
    "        values.append(int(gdb.parse_and_eval('ticks')))",
    "        gdb.execute('tfind', to_string=True)",
    "        assert int(gdb.parse_and_eval('$trace_frame')) >= 0",
    "except (gdb.error, AssertionError):",
    "    pass",
    "steps = set(b - a for a, b in zip(values, values[1:]))",
    "print('FRAMES READ %d CONSECUTIVE %s' % (len(values), steps <= {1}))",
    "end"]


class GdbKilled(GdbTestCase):
    """gdb dies (SIGKILL) while a ptrace-collector trace runs on an attached program."""

    def run_case(self, disconnected_tracing):
        before = descendants()
        tracee = Tracee(program("loop"), args=("-", 8))
        try:
            time.sleep(0.2)
            with Server("attach", pid=tracee.pid) as server:
                first = run_gdb(["monitor gdbtrace backend ptrace",
                                 f"set disconnected-tracing {disconnected_tracing}", "trace tick",
                                 "actions", "collect ticks", "end", "tstart", "continue &",
                                 "shell sleep 1", "shell kill -9 $PPID"],
                                program="loop", server=server, timeout=60)
                time.sleep(2)  # the trace goes on (or not) without gdb
                int3s_meanwhile = text_int3s(tracee.pid, program("loop"))
                second = run_gdb(["tstatus", "tstop"] + READ_ALL_FRAMES + ["detach"], program="loop",
                                 server=server, timeout=60)
            details = first.transcript() + "\n=== second gdb ===\n" + second.transcript()
            self.assertEqual(first.returncode, -signal.SIGKILL, details)
            frames = re.search(r"FRAMES READ (\d+) CONSECUTIVE (\w+)", second.output)
            self.assertTrue(frames, details)
            self.assertEqual(frames.group(2), "True", details)
            count = int(frames.group(1))
            if disconnected_tracing == "on":
                self.assertRegex(second.output, r"Trace is running", details)
                self.assertTrue(int3s_meanwhile, "trace breakpoint gone without gdb\n" + details)
                # ~100 hits a second: more than one second's worth means it went on without gdb.
                self.assertGreater(count, 150, details)
            else:
                self.assertRegex(second.output, r"(?i)Trace stopped because of disconnection", details)
                self.assertEqual(int3s_meanwhile, [], "trace breakpoint left after the stop\n" + details)
                self.assertGreater(count, 0, details)
                self.assertLess(count, 150, details)
            # gdbserver's rule after the second gdb detached: the attached program runs on.
            assert_loop_ran_to_end(self, tracee, details, timeout=60)
        finally:
            tracee.kill()
            kill_new_processes(before)

    def test_disconnected_tracing_on(self):
        self.run_case("on")

    def test_disconnected_tracing_off(self):
        self.run_case("off")


class TraceeGone(GdbTestCase):
    """The traced program ends mid-trace (killed, exec'ing, forking): the frames stay readable and
    tstatus says why the trace stopped. (gdb will not tfind without a live process, so the frames
    are read back through `tsave` and `target tfile`.)"""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="gdbtest-faults-")
        self.tfile = os.path.join(self.tmp.name, "trace.tf")

    def tearDown(self):
        self.tmp.cleanup()

    def read_back(self, *prints):
        return [f"tsave {self.tfile}", f"target tfile {self.tfile}", "tfind start"] + list(prints)

    def test_tracee_killed(self):
        with Server("once", program=program("loop"), args=("-", 30)) as server:
            pid = int(re.search(r"created; pid = (\d+)", server.log()).group(1))
            killer = threading.Timer(1.5, os.kill, (pid, signal.SIGKILL))
            killer.start()
            run = run_gdb(["monitor gdbtrace backend ptrace", "trace tick", "actions",
                           "collect ticks", "end", "tstart", "continue", "tstatus"] +
                          self.read_back("print ticks"), program="loop", server=server)
            killer.join()
        self.assertOutput(run, r"Program terminated with signal SIGKILL")
        # gdb has no stop reason for a process that went away (stock gdbserver says the run is still
        # running): terror with what happened, which gdb prints as an error, not "a tstop command".
        self.assertOutput(run, rf"Trace stopped by an error \(process {pid} was killed by signal 9 \(SIGKILL\)\)\.")
        self.assertOutput(run, r"Collected [1-9]\d* trace frames")
        self.assertOutput(run, r"Found trace frame 0, tracepoint 1")
        self.assertOutput(run, r"^\$1 = 0$")  # tick() collects before its increment

    def test_tracee_execs(self):
        run = run_gdb(["monitor gdbtrace backend ptrace", "break main", "run", "trace before_exec",
                       "actions", "collect $regs", "end", "tstart", "continue", "tstatus"] +
                      self.read_back(), program="exec")
        self.assertOutput(run, r"is executing new program: .*exec_target")
        self.assertOutput(run, r"Collected 1 trace frames")
        self.assertOutput(run, r"Trace stopped by an error \(process \d+ exec'd a new program\)")
        self.assertOutput(run, r"Found trace frame 0, tracepoint 2")

    # The parent's hit is at an instruction the stub cannot emulate, so it steps over it with the
    # int3 lifted; the fork child's exit (SIGCHLD) can arrive before that step, and the hit must
    # still count once.
    def test_tracee_forks(self):
        run = run_gdb(["monitor gdbtrace backend ptrace", "break main", "run", "trace in_child",
                       "trace in_parent", "actions", "collect parent_value", "end", "tstart",
                       "continue", "tstatus"] + self.read_back("print parent_value"), program="fork")
        self.assertOutput(run, r"exited normally")
        self.assertServerLog(run, r"child: child_value=42")
        self.assertServerLog(run, r"parent: child exited 7")
        self.assertOutput(run, r"Collected 1 trace frames")  # in_parent; the child is not traced
        self.assertOutput(run, r"Trace stopped by an error \(process \d+ exited with code 0\)")
        self.assertOutput(run, r"Found trace frame 0, tracepoint 3")
        self.assertOutput(run, r"^\$1 = 0$")  # collected on entry, before the assignment


def bpf_ids(kind):
    out = subprocess.run(["bpftool", kind, "show"], capture_output=True, text=True)
    return set(re.findall(r"^(\d+): ", out.stdout, re.M))


class ManyTracepoints(GdbTestCase):
    def test_a_thousand_tracepoints(self):
        # 1 000 tracepoints at one address (ptrace: one int3, 1 000 actions per hit): every hit of
        # every tracepoint is a frame, and the status accounts for each of them.
        n, calls = 1000, 3
        commands = ["monitor gdbtrace backend ptrace", "break done"]
        for _ in range(n):
            commands += ["trace probe_me", "actions", "collect i", "end"]
        commands += ["tstart", "continue", "tstop", "tstatus", "monitor gdbtrace status"]
        run = run_gdb(commands, program="trace_loop", args=(calls,), timeout=300)
        self.assertOutput(run, rf"Collected {n * calls} trace frames")
        self.assertEqual(len(re.findall(r"backend ptrace, hits 3, frames 3, drops 0, after stop 0, errors 0",
                                        run.output)), n, run.transcript()[-3000:])


class Load(GdbTestCase):
    def test_64_threads_hit_one_tracepoint(self):
        # Every collector here: 64 threads x 5 calls + 4 calls of the main thread, each one frame.
        for backend in [b for b in ("module", "ebpf", "ptrace") if b in available_collectors()]:
            with self.subTest(backend=backend):
                run = run_gdb(["monitor gdbtrace backend " + backend, "break done", "trace probe_me",
                               "actions", "collect i, j", "end", "tstart", "continue", "tstop",
                               "tstatus", "monitor gdbtrace status"],
                              program="trace_loop", args=(4, 64), timeout=300)
                self.assertOutput(run, r"Collected 324 trace frames")
                self.assertOutput(run, rf"backend {backend}, hits 324, frames 324, drops 0, after stop 0, errors 0")

    def test_full_buffer_bounds_the_stubs_memory(self):
        # A run that fills a 10 MB buffer (ptrace, `collect $regs`, linear: the trace stops when full):
        # the stub's resident memory stays within the buffer plus a fixed 64 MB.
        size = 10_000_000
        with Server("once", program=program("trace_loop"), args=(40000,)) as server:
            pid = server.proc.pid
            run = run_gdb([f"set trace-buffer-size {size}", "monitor gdbtrace backend ptrace",
                           "break done", "trace probe_me", "actions", "collect $regs", "end", "tstart",
                           "continue", "tstatus", f"shell grep VmRSS /proc/{pid}/status"],
                          server=server, program="trace_loop", timeout=300)
        self.assertOutput(run, r"Trace stopped because the buffer was full")
        rss_kb = int(re.search(r"VmRSS:\s+(\d+) kB", run.output).group(1))
        bound = size + 64 * 2**20
        if os.environ.get("GDBTRACE_SANITIZED"):
            bound += 512 * 2**20  # scripts/sanitize.sh: ASan's shadow memory and free quarantine
        self.assertLess(rss_kb * 1024, bound, run.transcript()[-2000:])


class StubKilledEbpf(GdbTestCase):
    """SIGKILL cannot be handled: the kernel's closing of the stub's fds must be enough. (An int3
    the stub wrote with ptrace, a user breakpoint, would stay: no test sets one here.)"""

    def setUp(self):
        require(self, "ebpf" in available_collectors(),
                f"no eBPF collector in this server (collectors: {available_collectors()})", key="no-ebpf")

    def test_sigkill_leaves_no_probe(self):
        before = descendants()
        progs_before, links_before = bpf_ids("prog"), bpf_ids("link")
        uprobes = Path("/sys/kernel/tracing/uprobe_events")
        tracee = Tracee(program("loop"), args=("-", 6))
        try:
            time.sleep(0.2)
            with Server("attach", pid=tracee.pid) as server:
                killer = KillLater(server, "KILL", lambda: tracee.pid)
                killer.start()
                run = run_gdb(session(backend="ebpf", user_breakpoint=False), program="loop", server=server, timeout=60)
                killer.join(10)
                rc = wait_exit(server.proc, 10)
            details = run.transcript()
            self.assertRegex(run.output, r"(?m)^tracepoint \d+ at 0x[0-9a-f]+.*: backend ebpf", details)
            self.assertEqual(rc, -signal.SIGKILL, details)
            self.assertEqual(tracer_pid(tracee.pid), 0, details)
            left_progs, left_links = set(), set()
            for _ in range(50):  # the kernel releases them asynchronously
                left_progs = bpf_ids("prog") - progs_before
                left_links = bpf_ids("link") - links_before
                if not left_progs and not left_links:
                    break
                time.sleep(0.1)
            # Other stubs on the machine may load their own meanwhile: only gdbtrace's count.
            named = subprocess.run(["bpftool", "prog", "show"], capture_output=True, text=True).stdout
            ours = {i for i in left_progs if re.search(rf"^{i}: .*name gdbtrace", named, re.M)}
            self.assertEqual(ours, set(), "BPF programs outlived the stub\n" + named)
            self.assertEqual(text_int3s(tracee.pid, program("loop")), [], "uprobe int3 left")
            if uprobes.exists():
                self.assertNotIn(program("loop"), uprobes.read_text(), "uprobe left in uprobe_events")
            assert_loop_ran_to_end(self, tracee, details)
        finally:
            tracee.kill()
            kill_new_processes(before)


if __name__ == "__main__":
    unittest.main()
