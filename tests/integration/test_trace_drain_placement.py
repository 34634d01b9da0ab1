"""The drain off the traced threads' CPUs (issue 29): during a run the stub's drain thread (its
io_context thread, the stub's main thread) runs on the CPUs the traced threads' affinity masks leave
free, when there are any, and `monitor gdbtrace status` says where; after the run it is back on its
own mask, and a program it starts during the run gets the mask the stub was started with.

The tracee (tests/programs/trace_loop.c) is pinned to CPU 0 with `taskset` once stopped at main; the
stub's mask is then read from /proc/<stub>/task/<stub>/status (Cpus_allowed_list) during and after
the run."""
import os
import re
import unittest

from gdbtest import GdbTestCase, Server, auto_backend, program, require, run_gdb


def mask_probe(pid, label):
    return f"shell echo {label} $(grep Cpus_allowed_list /proc/{pid}/task/{pid}/status)"


def policy_probe(pid, label):
    return f"shell echo {label} $(chrt -p {pid} | head -1)"


def cpu_list(text):
    """{cpus} of a Cpus_allowed_list value such as 0-1,3."""
    out = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


class DrainPlacement(GdbTestCase):
    def run_traced(self, pin):
        """A run of trace_loop under a tracepoint; PIN: taskset the tracee to CPU 0 first. Returns
        (gdb run, the stub's CPUs during the run, after it)."""
        backend = auto_backend()
        with Server("once", program=program("trace_loop"), args=("20",)) as server:
            pid = server.proc.pid
            commands = ["break main", "continue"]
            if pin:
                commands.append(f"shell taskset -a -p -c 0 $(pgrep -P {pid}) > /dev/null")
            commands += [f"monitor gdbtrace backend {backend}", "trace probe_me", "actions",
                         "collect $rdi", "end", "tstart", mask_probe(pid, "DURING"),
                         policy_probe(pid, "POLICY-DURING"), "monitor gdbtrace status", "tstop",
                         mask_probe(pid, "AFTER"), policy_probe(pid, "POLICY-AFTER"),
                         "monitor gdbtrace status"]
            run = run_gdb(commands, program=program("trace_loop"), server=server, timeout=120)
        self.assertRan(run)
        during = re.search(r"^DURING Cpus_allowed_list:\s*(\S+)", run.output, re.M)
        after = re.search(r"^AFTER Cpus_allowed_list:\s*(\S+)", run.output, re.M)
        self.assertTrue(during and after, run.transcript())
        return run, cpu_list(during.group(1)), cpu_list(after.group(1))

    def test_drain_leaves_the_pinned_tracee_cpu(self):
        own = os.sched_getaffinity(0)
        require(self, 0 in own and len(own) >= 2, "needs CPU 0 and another CPU to move the drain to")
        run, during, after = self.run_traced(pin=True)
        self.assertNotIn(0, during, run.transcript())  # off the tracee's CPU 0
        self.assertEqual(during, own - {0}, run.transcript())
        self.assertOutput(run, r"^drain: on CPUs \S+, off the traced threads' CPUs 0$")
        self.assertEqual(after, own, run.transcript())  # its own mask back after the run
        self.assertOutput(run, r"^drain \(last run\): on CPUs \S+, off the traced threads' CPUs 0$")

    def test_program_started_during_the_run_gets_the_stubs_own_cpus(self):
        # The drain moved the stub off CPU 0 for the run; a second program started meanwhile
        # (another inferior) must get the CPUs the stub was started on, not the drain's.
        own = os.sched_getaffinity(0)
        require(self, 0 in own and len(own) >= 2, "needs CPU 0 and another CPU to move the drain to")
        prog = program("trace_loop")
        child_mask = ("python print('CHILD', open('/proc/%d/status' % gdb.selected_inferior().pid)"
                      ".read().split('Cpus_allowed_list:')[1].split()[0])")
        with Server("multi") as server:
            pid = server.proc.pid
            run = run_gdb([f"set remote exec-file {prog}", "set args 20", "break main", "run",
                           f"shell taskset -a -p -c 0 $(pgrep -P {pid}) > /dev/null",
                           f"monitor gdbtrace backend {auto_backend()}", "trace probe_me", "actions",
                           "collect $rdi", "end", "tstart", mask_probe(pid, "DURING"),
                           f"add-inferior -exec {prog}", "inferior 2", f"set remote exec-file {prog}",
                           "set args 5", "run", child_mask, "kill inferiors 1 2"],
                          program=prog, server=server, timeout=120)
        self.assertRan(run)
        during = re.search(r"^DURING Cpus_allowed_list:\s*(\S+)", run.output, re.M)
        child = re.search(r"^CHILD (\S+)", run.output, re.M)
        self.assertTrue(during and child, run.transcript())
        self.assertNotIn(0, cpu_list(during.group(1)), run.transcript())  # the drain was moved
        self.assertEqual(cpu_list(child.group(1)), own, run.transcript())

    def test_drain_stays_when_no_cpu_is_spare(self):
        own = os.sched_getaffinity(0)
        run, during, after = self.run_traced(pin=False)
        self.assertEqual(during, own, run.transcript())
        self.assertEqual(after, own, run.transcript())
        if os.geteuid() != 0:  # only root may raise it
            self.assertOutput(run, r"^drain: on CPUs \S+, shared with the traced threads \(CPUs \S+; no spare "
                                   r"CPU\); real-time priority refused: .*$")
            return
        # Sharing the tracee's CPUs, the drain runs at real-time priority during the run only.
        self.assertOutput(run, r"^drain: on CPUs \S+, shared with the traced threads \(CPUs \S+; no spare "
                               r"CPU\); at real-time priority \(SCHED_FIFO 1\)$")
        self.assertOutput(run, r"^POLICY-DURING pid \d+'s current scheduling policy: SCHED_FIFO\|SCHED_RESET_ON_FORK$")
        self.assertOutput(run, r"^POLICY-AFTER pid \d+'s current scheduling policy: SCHED_OTHER$")


if __name__ == "__main__":
    unittest.main()
