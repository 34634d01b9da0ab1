"""The eBPF collector end to end: the real gdb 13 drives gdbtrace-server with
`monitor gdbtrace backend ebpf`; every tracepoint here must be served by eBPF (checked with
`monitor gdbtrace status`), and what gdb reads back must be the program's real values.

Tracee: tests/programs/trace_loop.c (probe_me(i, 3*i) and step_me(i) for i < N, then done()), and
loop.c (heartbeat file) for the stub-killed case. Skipped when the server has no eBPF collector here
(no root / BPF / uprobes), and failed instead under CI=true or GDBTRACE_STRICT=1."""

import os
import re
import subprocess
import tempfile
import time
import unittest
from pathlib import Path

from gdbtest import (GdbTestCase, Server, Tracee, available_collectors, descendants, kill_new_processes,
                     program, require, run_gdb)

EBPF = ["monitor gdbtrace backend ebpf"]
PROLOGUE = ["break done"] + EBPF


def traced(actions, setup=(), after=("tstop",), tp="trace probe_me"):
    """Commands: one tracepoint with ACTIONS on the eBPF backend, run to done(), then AFTER."""
    return PROLOGUE + list(setup) + [tp, "actions"] + list(actions) + \
        ["end", "tstart", "continue", "monitor gdbtrace status"] + list(after)


class EbpfTestCase(GdbTestCase):
    def setUp(self):
        require(self, "ebpf" in available_collectors(),
                f"no eBPF collector in this server (collectors: {available_collectors()})", key="no-ebpf")

    def assertEbpf(self, run, count=1):
        backends = re.findall(r"^tracepoint \d+ at 0x[0-9a-f]+.*: backend (\w+)", run.output, re.M)
        self.assertTrue(backends, run.transcript())
        self.assertEqual(backends[:count], ["ebpf"] * count, run.transcript())


class Collect(EbpfTestCase):
    def test_backend_describes_itself(self):
        run = run_gdb(["monitor gdbtrace backend"], program="trace_loop", args=(1,))
        # Linux 6.19+ lets the program write registers: it emulates common instructions (tested in
        # the QEMU guest of the newest kernel); before, the kernel single-steps and says why.
        self.assertOutput(run, r"ebpf: eBPF: uprobe .*(kernel single-steps the probed instruction "
                               r"\(register writes need Linux 6\.19\+\)|common instructions "
                               r"emulated by the program)")

    def test_regs_args_locals_globals(self):
        run = run_gdb(traced(["collect $regs, $args, $locals", "collect global_counter, message",
                              "collect *global_ptr", "collect global_array[2]@3",
                              "collect global_point.name"],
                             after=["tstop", "tstatus", "tfind 3", "print i", "print j",
                                    "print global_counter", "print *global_ptr",
                                    "print global_array[2]@3", "print global_point.name",
                                    "print message", "print $pc == $rip", "info registers rip",
                                    "print $rdi", "print $xmm0", "print global_array[0]"]),
                      program="trace_loop", args=(5,))
        self.assertEbpf(run)
        self.assertOrdered(run, [
            r"Breakpoint 1, done \(total=",
            r"Collected 5 trace frames",
            r"Found trace frame 3, tracepoint 2",
            r"\$1 = 3", r"\$2 = 9",
            r"\$3 = 12",
            r"\$4 = \{x = 7, y = 8, name = \"origin",
            r"\$5 = \{30, 40, 50\}",
            r"\$6 = \"origin",
            r"\$7 = \"hello trace",
            r"\$8 = 1",
            r"rip\s+0x[0-9a-f]+\s+0x[0-9a-f]+ <probe_me\+\d+>",
            r"\$9 = 3",                    # first argument register at the probe
            r"\$10 = <unavailable>|\$10 = \{.*<unavailable>",  # no FPU/SSE state in a uprobe
            r"\$11 = <unavailable>",       # not collected
        ])

    def test_pointer_ranges_and_strings(self):
        run = run_gdb(traced(["collect *global_ptr@1, global_point.name[0]@4, message[6]@5"],
                             after=["tstop", "tfind 1", "print global_point.name[0]@4",
                                    "print message[6]@5", "print global_ptr->y"]),
                      program="trace_loop", args=(2,))
        self.assertEbpf(run)
        self.assertOrdered(run, [r"Found trace frame 1", r"\$1 = \"orig\"", r"\$2 = \"trace\"",
                                 r"\$3 = 8"])


class ConditionsAndCounts(EbpfTestCase):
    def test_condition_and_pass_count(self):
        run = run_gdb(PROLOGUE + ["trace probe_me if i == 2 || i == 4", "actions", "collect i", "end",
                                  "trace step_me", "passcount 3 3", "actions", "collect a", "end",
                                  "tstart", "monitor gdbtrace status", "continue", "tstatus",
                                  "tfind tracepoint 2", "print i", "tfind tracepoint 2"],
                      program="trace_loop", args=(10,))
        self.assertEbpf(run, 2)
        self.assertOrdered(run, [
            # probe_me(2) matches, then step_me(2) is step_me's third hit: the run stops there
            # (probe_me(4) never runs while tracing), like gdbserver.
            r"Trace stopped by tracepoint 3",
            r"Collected 4 trace frames",
            r"Found trace frame \d+, tracepoint 2", r"\$1 = 2",
            r"No trace frame found",
        ])

    def test_tsv_arithmetic(self):
        run = run_gdb(PROLOGUE + ["tvariable $hits = 10", "tvariable $sum = 0", "trace probe_me",
                                  "actions", "teval $hits = $hits + 1", "teval $sum = $sum + j * 2",
                                  "collect $hits, $sum", "end", "tstart", "continue",
                                  "monitor gdbtrace status", "print $hits", "tstop", "print $hits",
                                  "print $sum", "tfind 0", "print $hits", "tfind 4", "print $hits",
                                  "print $sum", "tfind none", "info tvariables"],
                      program="trace_loop", args=(5,))
        self.assertEbpf(run)
        # j = 3*i for i < 5: sum of 2*j = 6 * (0+1+2+3+4) = 60
        self.assertOrdered(run, [r"\$1 = 15", r"\$2 = 15", r"\$3 = 60", r"Found trace frame 0",
                                 r"\$4 = 11", r"Found trace frame 4", r"\$5 = 15", r"\$6 = 60",
                                 r"\$hits\s+10\s+15"])

    def test_trace_timestamp_is_collected(self):
        run = run_gdb(traced(["collect $trace_timestamp, i"],
                             after=["tstop", "tfind 0", "set $t0 = $trace_timestamp", "tfind 2",
                                    "print $trace_timestamp >= $t0", "print $trace_timestamp > 0"]),
                      program="trace_loop", args=(3,))
        self.assertEbpf(run)
        self.assertOrdered(run, [r"Found trace frame 2", r"\$1 = 1", r"\$2 = 1"])


class SharedLibrary(EbpfTestCase):
    def test_tracepoint_in_a_shared_library(self):
        # greet() lives in libgreet.so: the uprobe goes on the library file at its file offset.
        run = run_gdb(["break main", "continue"] + EBPF +
                      ["trace greet", "actions", "collect who, *who@6, greet_calls", "end", "tstart",
                       "monitor gdbtrace status", "break exit", "continue", "tstop", "tstatus",
                       "tfind 1", "print who", "print greet_calls"],
                      program="main_uses_libgreet")
        self.assertEbpf(run)
        self.assertOrdered(run, [r"Collected 2 trace frames", r"Found trace frame 1",
                                 r"\$1 = 0x[0-9a-f]+ \"again\"", r"\$2 = 1"])


class InstalledWhereStopped(EbpfTestCase):
    def test_thread_stopped_at_the_address_does_not_hit_on_resume(self):
        # gdb steps over a breakpoint at the pc it resumes from; a tracepoint installed at that pc
        # must not collect the resumption (the uprobe would): step_me(1)..(3) only.
        run = run_gdb(["break step_me if a == 1", "continue"] + PROLOGUE +
                      ["delete 1", "trace step_me", "actions", "collect a", "end", "tstart",
                       "monitor gdbtrace status", "continue", "tstop", "tstatus", "tfind 0",
                       "print a"],
                      program="trace_loop", args=(5,))
        self.assertEbpf(run)
        self.assertOrdered(run, [r"Breakpoint 1, step_me \(a=1\)", r"Collected 3 trace frames",
                                 r"Found trace frame 0", r"\$1 = 2"])


class OneAddress(EbpfTestCase):
    def test_tracepoints_at_one_address_collect_in_definition_order(self):
        # The kernel runs a uprobe's consumers newest first; gdb (like gdbserver) expects the frames
        # of one hit in tracepoint order, also for a tracepoint added there during the run.
        run = run_gdb(PROLOGUE + ["break step_me if a == 1",
                                  "trace probe_me", "actions", "collect i", "end",
                                  "trace probe_me", "actions", "collect j", "end",
                                  "tstart", "continue",
                                  "trace probe_me", "actions", "collect i", "end",
                                  "continue", "tstop", "tstatus", "monitor gdbtrace status",
                                  "python",
                                  "order = []",
                                  "gdb.execute('tfind start', to_string=True)",
                                  "while int(gdb.parse_and_eval('$trace_frame')) != -1:",
                                  "  order.append(int(gdb.parse_and_eval('$tracepoint')))",
                                  "  try:",
                                  "    gdb.execute('tfind', to_string=True)",
                                  "  except gdb.error:",
                                  "    break",
                                  "print('ORDER', order)",
                                  "end"],
                      program="trace_loop", args=(3,))
        self.assertEbpf(run, 2)
        self.assertOutput(run, r"Breakpoint 2, step_me \(a=1\)")
        self.assertOutput(run, r"^ORDER \[3, 4, 3, 4, 3, 4, 5\]$")
        self.assertOutput(run, r"tracepoint 3 at 0x[0-9a-f]+: backend ebpf, hits 3, frames 3")
        self.assertOutput(run, r"tracepoint 5 at 0x[0-9a-f]+: backend ebpf, hits 1, frames 1")


class SteppingOverAProbe(EbpfTestCase):
    def test_range_step_over_a_probed_instruction(self):
        # `step` over a line with a uprobe in its middle, on a `jmp` the kernel emulates: it ends the
        # step over it with a SIGTRAP the thread sends itself, which must not end gdb's range step
        # early (every vCont;r stops outside its range, as with stock gdbserver); the hit is collected.
        run = run_gdb(["break range_line", "continue", "delete 1"] + EBPF + [
            "trace *range_site", "actions", "collect range_value", "end", "tstart",
            "monitor gdbtrace status", "set debug remote 1", "step", "set debug remote 0", "tstop",
            "tstatus", "print range_value"],
            program="trace_loop", args=(2,))
        self.assertEbpf(run)
        # Each vCont;rSTART,END ends with a stop outside [START, END) (rip is register 0x10).
        steps = re.findall(r"Sending packet: \$vCont;r([0-9a-f]+),([0-9a-f]+).*?\n.*?"
                           r"Packet received: T05[^\n]*?10:([0-9a-f]{16})", run.output, re.S)
        self.assertTrue(steps, run.transcript())
        for start, end, rip in steps:
            pc = int.from_bytes(bytes.fromhex(rip), "little")
            self.assertFalse(int(start, 16) <= pc < int(end, 16),
                             f"range step {start},{end} stopped inside at {pc:#x}\n" + run.transcript())
        self.assertOutput(run, r"Collected 1 trace frames")
        self.assertOutput(run, r"^\$1 = 2$")


class BufferAndThreads(EbpfTestCase):
    def test_circular_keeps_newest(self):
        # A frame is stored compactly: header, 22 registers (177 bytes), 'M' of i (15): 198 bytes.
        run = run_gdb(traced(["collect $regs, i"],
                             setup=["set trace-buffer-size 1000", "set circular-trace-buffer on"],
                             after=["tstatus", "tstop", "tfind 0", "print i"]),
                      program="trace_loop", args=(20,))
        self.assertEbpf(run)
        self.assertOrdered(run, [r"Buffer contains 5 trace frames \(of 20 created total\)",
                                 r"Trace buffer is circular",
                                 r"Found trace frame 0", r"\$1 = 15"])

    def test_threads_hit_one_tracepoint(self):
        run = run_gdb(traced(["collect i, j"], after=["tstop", "tstatus"] +
                             [x for k in range(3) for x in ("tfind pc probe_me" if k == 0 else "tfind",
                                                            "print i")]),
                      program="trace_loop", args=(4, 3))
        self.assertEbpf(run)
        # 4 calls from main + 3 threads x 5 calls
        self.assertOutput(run, r"Collected 19 trace frames")
        self.assertOutput(run, r"hits 19, frames 19, drops 0, after stop 0, errors 0")
        ids = set(int(x) for x in re.findall(r"^\$\d+ = (\d+)", run.output, re.M))
        self.assertTrue(ids, run.transcript())

    def test_tracee_exits_while_probed(self):
        run = run_gdb(EBPF + ["trace probe_me", "actions", "collect i", "end", "tstart",
                              "monitor gdbtrace status", "continue", "tstatus"],
                      program="trace_loop", args=(3,))
        self.assertEbpf(run)
        self.assertOrdered(run, [r"exited normally|exited with code", r"Collected 3 trace frames"])
        self.assertNotRegex(run.server_log, r"(?i)error|fail", run.transcript())


class ErrorsAreClear(EbpfTestCase):
    def test_while_stepping_is_refused_in_plain_words(self):
        run = run_gdb(PROLOGUE + ["trace step_me", "actions", "collect a", "while-stepping 2",
                                  "collect $pc", "end", "end", "tstart", "tstatus"],
                      program="trace_loop", args=(2,))
        self.assertOutput(run, r"while-stepping needs the ptrace collector")

    def test_unreadable_memory_in_condition_stops_with_error(self):
        run = run_gdb(PROLOGUE + ["trace probe_me if *(int *) 16 == 0", "actions", "collect i", "end",
                                  "tstart", "continue", "tstatus"],
                      program="trace_loop", args=(3,))
        self.assertOutput(run, r"(?i)Trace stopped by an error.*memory")


class StubKilled(EbpfTestCase):
    """SIGKILL of the stub: the kernel closes its fds, so the uprobes and programs go away and the
    tracee (attached, so not killed with the stub) keeps running."""

    def test_sigkill_detaches_probes(self):
        before = descendants()
        tmp = tempfile.TemporaryDirectory(prefix="gdbtest-bpf-")
        heartbeat = Path(tmp.name) / "hb"
        tracee = Tracee(program("loop"), args=(str(heartbeat), 120))
        try:
            deadline = time.time() + 5
            while not heartbeat.exists() and time.time() < deadline:
                time.sleep(0.02)
            def prog_ids():
                out = subprocess.run(["bpftool", "prog", "show"], capture_output=True, text=True)
                return set(re.findall(r"^(\d+): ", out.stdout, re.M))

            before_ids = prog_ids()
            with Server("attach", pid=tracee.pid) as server:
                run = run_gdb(EBPF + ["trace tick", "actions", "collect ticks", "end", "tstart",
                                      "monitor gdbtrace status", "shell bpftool prog show",
                                      f"shell kill -9 {server.proc.pid}"],
                              program="loop", server=server)
                self.assertEbpf(run)
                server.proc.wait(timeout=10)
            # This stub's programs (other servers on the machine may have their own).
            ours = set(re.findall(r"^(\d+): kprobe\s+name gdbtrace_tp1\b", run.output, re.M))
            ours -= before_ids
            self.assertTrue(ours, run.transcript())
            # The tracee was stopped under ptrace when the stub died; it must not be dead.
            os.kill(tracee.pid, 18)  # SIGCONT, in case the tracer's death left it group-stopped
            time.sleep(0.3)
            self.assertIsNone(tracee.proc.poll(), "tracee died with the stub")
            first = heartbeat.read_text()
            time.sleep(0.5)
            self.assertNotEqual(first, heartbeat.read_text(), "tracee is not running")
            left = set()
            for _ in range(50):
                left = ours & prog_ids()
                if not left:
                    break
                time.sleep(0.1)
            self.assertFalse(left, "BPF programs outlived the stub")
        finally:
            tracee.kill()
            tmp.cleanup()
            kill_new_processes(before)


if __name__ == "__main__":
    unittest.main()


class ManyTracepoints(EbpfTestCase):
    """Installing and removing eBPF tracepoints is quick: 200 of them go in at tstart and out at
    tstop well within gdb's default 2 s remotetimeout (each uprobe detach waits for a kernel grace
    period; the collector closes them concurrently so they share one), twice in a row."""

    def test_200_tracepoints_with_default_remotetimeout(self):
        count, hits = 200, 3
        tps = []
        for _ in range(count):
            tps += ["trace probe_me", "actions", "collect $rdi", "end"]
        run = run_gdb(["show remotetimeout"] + PROLOGUE + tps +
                      ["tstart", "continue", "tstop", "tstatus", "monitor gdbtrace status",
                       "tstart", "tstop", "tstatus"],
                      program="trace_loop", args=(hits,), timeout=180)
        self.assertOutput(run, r"Timeout limit to wait for target to respond is 2\.")
        self.assertNotIn("Bogus reply", run.output, run.transcript())
        self.assertNotIn("using ptrace", run.output, run.transcript())
        self.assertEbpf(run, count)
        self.assertOrdered(run, [r"Collected %d trace frames" % (count * hits),
                                 r"Collected 0 trace frames"])
