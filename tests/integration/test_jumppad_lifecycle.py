"""The jump pad where binary patching goes wrong: attached to a running multithreaded program on a
libc function (frames = the program's own count of its calls, at a low and at a sustained rate), the stub SIGKILLed under four
threads, 1 000 install/remove cycles under a thread looping through the site (each result checked
by the program), a fork child that inherits the jump, and `collect *p` with bad pointers on an
`ftrace` under `auto` (the pad does not compile reads through pointers yet: the tracepoint falls back, the bad reads are
errors, the program runs on). Real gdb against the real stub; gdbtrace-only (stock gdbserver has no
jump pad without LD_PRELOAD of its agent, which cannot attach)."""

import os
import re
import time
import unittest

from gdbtest import (GdbTestCase, Server, Tracee, descendants, is_stock_gdbserver, kill_new_processes,
                     program, run_gdb)


def backends(run):
    return re.findall(r"^tracepoint \d+ at 0x[0-9a-f]+.*: backend (\w+)", run.output, re.M)


def finish(tracee):
    """The tracee's output once it exits by itself (SIGCONT first, in case its tracer's death left
    it group-stopped)."""
    os.kill(tracee.pid, 18)
    out, _ = tracee.proc.communicate(timeout=60)
    return tracee.proc.returncode, out.decode()


GETPPID = ["ftrace *getppid", "actions", "collect $rdi", "end"]


def traced_while_running(args, tracepoints, buffer_size):
    """mt_libc_calls ARGS started, attached while it runs, TRACEPOINTS (gdb lines) traced from
    tstart to calls_done: (the gdb run, the program's exit status and output)."""
    before = descendants()
    tracee = Tracee(program("mt_libc_calls"), args=args)
    try:
        time.sleep(0.3)
        with Server("attach", pid=tracee.pid) as server:
            run = run_gdb([f"set trace-buffer-size {buffer_size}", "break calls_done", *tracepoints,
                           "tstart", "continue", "tstop", "tstatus", "monitor gdbtrace status", "detach"],
                          program="mt_libc_calls", server=server, timeout=120)
        code, out = finish(tracee)
        return run, code, out
    finally:
        tracee.kill()
        kill_new_processes(before)


@unittest.skipIf(is_stock_gdbserver(), "the jump pad is gdbtrace's collector; stock gdbserver's agent needs LD_PRELOAD")
class JumpPadLifecycle(GdbTestCase):
    def test_attach_libc_function_hit_from_four_threads(self):
        # Attached while the program runs (its 4 threads started, idle until 1.5 s), `ftrace` on
        # libc's getppid (first instruction `mov $0x6e,%eax`): every call of the 10 s window is
        # a frame, as many as the program counted itself, and every result stays right.
        run, code, out = traced_while_running((10, 4, 1500), GETPPID, 200000000)
        self.assertEqual(backends(run), ["jumppad"], run.transcript())
        calls = re.search(r"getppid calls=(\d+) wrong=0\n", out)
        self.assertTrue(calls and int(calls.group(1)) > 10000, out)
        self.assertEqual(len(re.findall(r"thread \d calls=[1-9]\d*", out)), 4, out)
        self.assertOutput(run, rf"Collected {calls.group(1)} trace frames")
        self.assertOutput(run, r"backend jumppad, hits \d+, frames \d+, drops 0,")
        self.assertEqual(code, 0, out)
    def test_sustained_rate_loses_nothing(self):
        # 4 threads at ~100 000 getppid calls per second each for 2 s, into a 400 MB buffer: far
        # more hits than 4 MB rings hold between one-second drains (88 920 of 755 500 frames were
        # kept so). A pad never enters the kernel, so nothing wakes the stub: it polls the rings
        # every 10 ms, and sizes them from the buffer (64 MB per CPU here) for when it cannot run.
        # Under ASan + UBSan (scripts/sanitize.sh) the stub drains a few times slower: the same
        # number of hits at half the rate, over 4 s (still more than the rings hold: the polls
        # must drain during the run).
        args = (4, 4, 1500, 250) if os.environ.get("GDBTRACE_SANITIZED") else (2, 4, 1500, 500)
        run, code, out = traced_while_running(args, GETPPID, 400000000)
        self.assertEqual(backends(run), ["jumppad"], run.transcript())
        calls = re.search(r"getppid calls=(\d+) wrong=0\n", out)
        self.assertTrue(calls and int(calls.group(1)) > 200000, out)
        self.assertOutput(run, rf"Collected {calls.group(1)} trace frames")
        self.assertOutput(run, rf"backend jumppad, hits {calls.group(1)}, frames {calls.group(1)}, drops 0,")
        self.assertEqual(code, 0, out)
    def test_sites_in_the_executable_and_in_libc(self):
        # The executable (PIE, ~0x55..) and libc (~0x7f..) are terabytes apart, beyond any rel32
        # jump: the area is mapped a second time near the second site (the same pages), and both
        # sites are the jump pad's, with one count.
        run, code, out = traced_while_running(
            (2, 2, 1500, 100), GETPPID + ["ftrace *mlc_site", "actions", "collect $rdi", "end"], 200000000)
        self.assertEqual(backends(run), ["jumppad", "jumppad"], run.transcript())
        calls = re.search(r"getppid calls=(\d+) wrong=0\n", out)
        self.assertTrue(calls and int(calls.group(1)) > 1000, out)
        n = int(calls.group(1))
        self.assertOutput(run, rf"Collected {2 * n} trace frames")
        self.assertEqual(len(re.findall(rf"backend jumppad, hits {n}, frames {n}, drops 0,", run.output)),
                         2, run.transcript())
        self.assertEqual(code, 0, out)
    def test_stub_killed_under_four_threads(self):
        # SIGKILL of the stub while 4 threads go through the jump: they run on to a right finish.
        before = descendants()
        tracee = Tracee(program("mt_libc_calls"), args=(3, 4, 500))
        try:
            time.sleep(0.3)
            with Server("attach", pid=tracee.pid) as server:
                run = run_gdb(["ftrace *getppid", "actions", "collect $rdi", "end", "tstart",
                               "monitor gdbtrace status", "continue &", "shell sleep 1.5",
                               f"shell kill -9 {server.proc.pid}"],
                              program="mt_libc_calls", server=server)
                self.assertEqual(backends(run), ["jumppad"], run.transcript())
                server.proc.wait(timeout=10)
            code, out = finish(tracee)
            self.assertEqual(code, 0, out + run.transcript())
            self.assertRegex(out, r"getppid calls=[1-9]\d* wrong=0\n")
        finally:
            tracee.kill()
            kill_new_processes(before)

    def test_thousand_install_remove_cycles_under_a_looping_thread(self):
        # A worker calls jp_probe in a tight loop and checks each result (worker_bad); the main
        # thread stops at each usleep, and the jump goes in (tstart) and out (tstop) 1 000 times
        # while the worker is wherever it was stopped: at the site, in the pad, past it.
        n = 2010
        cycle = ["tstart", "continue", "tstop", "continue", "set $i = $i + 1"]
        run = run_gdb(["monitor gdbtrace backend jumppad", "break main", "continue", "break usleep",
                       "continue", "ftrace *jp_probe", "actions", "collect $rdi", "end", "set $i = 0",
                       "while $i < 1000", *cycle, "end", "print $i", "monitor gdbtrace status",
                       "delete", "continue"],
                      program="bench_jumppad", args=(n, 1, 100), timeout=600)
        self.assertOutput(run, r"\$1 = 1000")
        self.assertEqual(backends(run), ["jumppad"], run.transcript())
        self.assertRegex(run.server_log, r"BENCH jumppad calls=%d sum=%d worker_calls=[1-9]\d* .*worker_bad=0"
                         % (n, sum(range(n)) + 3 * n), run.transcript())
        self.assertOutput(run, r"exited normally")

    def test_fork_child_inherits_an_inert_pad(self):
        # The child inherits the jump and the shared area, but not the armed word (a private page
        # wiped on fork): its pad only runs the relocated instruction, so it computes right and
        # writes nothing into the parent's rings. Frames: the parent's 2 x 100 calls only.
        run = run_gdb(["break fork_done", "ftrace *jp_fork_site", "actions", "collect $rdi", "end",
                       "tstart", "continue", "tstop", "tstatus", "monitor gdbtrace status", "continue"],
                      program="jp_fork", args=(100,))
        self.assertEqual(backends(run), ["jumppad"], run.transcript())
        self.assertOutput(run, r"Collected 200 trace frames")
        self.assertIn("child calls=100 bad=0 first_byte=0xe9", run.server_log, run.transcript())
        self.assertIn("child exit=0 signal=0", run.server_log, run.transcript())
        self.assertIn("parent calls=200 bad=0", run.server_log, run.transcript())
        self.assertOutput(run, r"exited normally")

    def test_bad_pointers_under_auto(self):
        # `collect *p` is refused by the pad (it copies memory ranges, but does not compile reads
        # through a pointer in an expression yet): under auto the tracepoint falls back and says why in the status
        # row. The read through NULL or an unmapped page is an error that stops the trace, as
        # stock gdbserver stops on an action's error: the good frame stays, no frame holds a value
        # for the bad pointer, and the program computes and finishes as untraced.
        for which in ("null", "unmapped"):
            run = run_gdb(["break deref_done", "ftrace *jp_deref", "actions", "collect *p", "end",
                           "tstart", "continue", "tstop", "monitor gdbtrace status", "tstatus",
                           "tfind 0", "print/x *p", "tfind 1", "tfind none", "continue"],
                          program="jp_deref", args=(which,))
            found = backends(run)
            self.assertTrue(found and "jumppad" not in found, run.transcript())
            self.assertOutput(run, r"backend \w+, hits 2, frames 1, .*errors 1 \(jumppad: memory "
                                   r"reads in expressions \(`collect \*p`\) are not compiled")
            self.assertOutput(run, r"Trace stopped by an error \(tracepoint 2: memory unreadable")
            self.assertOutput(run, r"Collected 1 trace frames")
            self.assertOrdered(run, [r"Found trace frame 0, tracepoint 2", r"\$1 = 0x1234567",
                                     r"No trace frame found"])
            self.assertNotRegex(run.output, r"\$2 = ")
            self.assertIn("deref results 1234567 -1 -1", run.server_log)
            self.assertOutput(run, r"exited normally")
        forced = run_gdb(["monitor gdbtrace backend jumppad", "break deref_done", "ftrace *jp_deref",
                          "actions", "collect *p", "end", "tstart"], program="jp_deref")
        self.assertOutput(forced, r"jumppad: memory reads in expressions")


if __name__ == "__main__":
    unittest.main()
