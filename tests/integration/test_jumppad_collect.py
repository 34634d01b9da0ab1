"""The jump-pad collector end to end: the real gdb 13 drives gdbtrace-server; `ftrace` at a site
whose first instruction is a 7-byte rip-relative load (tests/programs/bench_jumppad.c, a PIE built
-O2) must be served by the jump pad (`monitor gdbtrace status` says so), frames and TSVs must be the
program's real values, the program's output unchanged, the original bytes back after tstop; a plain
`trace` never uses it; a site it cannot patch goes to the next collector with the reason; the
program runs on when the stub is SIGKILLed mid-trace; threads executing the function while the jump
is written and while it is in do not crash."""

import os
import re
import time
import unittest

from gdbtest import GdbTestCase, Server, Tracee, descendants, kill_new_processes, program, run_gdb

PROG = "bench_jumppad"
# The 7 bytes of jp_probe's first instruction: mov jp_bias(%rip),%rax.
FIRST_BYTES = r"0x48\s+0x8b\s+0x05"


def backends(run):
    return re.findall(r"^tracepoint \d+ at 0x[0-9a-f]+.*: backend (\w+)", run.output, re.M)


class JumpPad(GdbTestCase):
    def test_ftrace_registers_and_tsv(self):
        n = 10
        run = run_gdb(["break jp_done", "tvariable $hits = 0", "x/3xb jp_probe", "ftrace *jp_probe",
                       "actions", "collect $rdi", "teval $hits = $hits + 1", "end", "tstart",
                       "x/3xb jp_probe", "continue", "monitor gdbtrace status", "print $hits",
                       "tstop", "tstatus", "tfind 0", "print $rdi", "tfind 7", "print $rdi",
                       "print $pc == (long)&jp_probe", "tfind none", "x/3xb jp_probe"],
                      program=PROG, args=(n,))
        self.assertEqual(backends(run)[:1], ["jumppad"], run.transcript())
        # Patched while tracing (a jmp the stub hides from gdb's reads, as gdbserver hides its fast
        # tracepoint jumps: gdb would disassemble it and save it as a breakpoint's shadow), the
        # program's own result unchanged, the bytes back after.
        self.assertOrdered(run, [FIRST_BYTES, FIRST_BYTES, r"\$1 = 10",
                                 rf"Collected {n} trace frames", r"\$2 = 0", r"\$3 = 7", r"\$4 = 1",
                                 FIRST_BYTES])
        # The program's output (in the server's log) is what it prints untraced.
        self.assertIn(f"BENCH jumppad calls={n} sum={sum(range(n)) + 3 * n} ", run.server_log)

    def test_condition_over_registers_runs_in_the_pad(self):
        # `x & 3 == 0 || x == 5` over jp_probe's argument (in rdi at -O2): compiled into the pad
        # (gdb sends bit_and, equal, dup/if_goto/pop for ||); only the hits where it holds are
        # frames. A condition reading memory (the global jp_bias) goes to the next collector.
        n = 20
        # The TSV's adds are the stub's (k per frame or drop): only hits that pass count.
        run = run_gdb(["break jp_done", "tvariable $n = 100",
                       "ftrace *jp_probe if ($rdi & 3) == 0 || $rdi == 5", "actions",
                       "collect $rdi", "teval $n = $n + 2", "end", "tstart", "continue",
                       "monitor gdbtrace status", "print $n", "tstop", "tstatus", "print $n",
                       "tfind 2", "print $rdi", "tfind 3", "print $rdi"],
                      program=PROG, args=(n,))
        self.assertEqual(backends(run)[:1], ["jumppad"], run.transcript())
        kept = [x for x in range(n) if x & 3 == 0 or x == 5]
        self.assertOutput(run, rf"backend jumppad, hits {len(kept)}, frames {len(kept)}, drops 0")
        n_value = 100 + 2 * len(kept)
        self.assertOrdered(run, [rf"\$1 = {n_value}", rf"Collected {len(kept)} trace frames",
                                 rf"\$2 = {n_value}", rf"\$3 = {kept[2]}", rf"\$4 = {kept[3]}"])
        self.assertIn(f"BENCH jumppad calls={n} sum={sum(range(n)) + 3 * n} ", run.server_log)
        memory = run_gdb(["break jp_done", "ftrace *jp_probe if jp_bias == 3", "actions", "collect $rdi",
                          "end", "tstart", "continue", "monitor gdbtrace status", "tstop", "tstatus"],
                         program=PROG, args=(n,))
        self.assertNotIn("jumppad", backends(memory), memory.transcript())
        self.assertOutput(memory, r"\(jumppad: the condition reads memory")
        self.assertOutput(memory, rf"Collected {n} trace frames")

    def test_plain_trace_never_uses_it(self):
        run = run_gdb(["break jp_done", "trace *jp_probe", "tstart", "continue",
                       "monitor gdbtrace status", "tstop", "tstatus"], program=PROG, args=(5,))
        found = backends(run)
        self.assertTrue(found, run.transcript())
        self.assertNotIn("jumppad", found, run.transcript())
        self.assertNotRegex(run.output, r"jumppad: ")
        self.assertOutput(run, r"Collected 5 trace frames")

    def test_plain_trace_beside_an_ftrace_shares_the_pad(self):
        # gdb's trace-break.exp: `ftrace X` then `trace X`. The jmp covers the site's bytes, so no
        # int3 may go there: the plain tracepoint joins the pad, and both collect every hit.
        n = 6
        run = run_gdb(["break jp_done", "ftrace *jp_probe", "actions", "collect $rdi", "end",
                       "trace *jp_probe", "actions", "collect $rsi", "end", "tstart", "continue",
                       "monitor gdbtrace status", "tstop", "tstatus", "tfind tracepoint 3",
                       "print $rdi"], program=PROG, args=(n,))
        self.assertEqual(backends(run), ["jumppad", "jumppad"], run.transcript())
        self.assertOutput(run, rf"Collected {2 * n} trace frames")
        self.assertOrdered(run, [r"Found trace frame \d+, tracepoint 3", r"\$1 = 0"])
        self.assertIn(f"BENCH jumppad calls={n} sum={sum(range(n)) + 3 * n} ", run.server_log)

    def test_frames_of_the_pad_and_ebpf_are_numbered_in_hit_order(self):
        # gdb's trace-break.exp: an `ftrace` (the pad) and a `trace` (eBPF, a uprobe at jp_probe+7,
        # past the relocated load) hit in turn in one `continue`. The engine drains one collector
        # after the other; the frames must still be numbered as they hit: 1, 2, 1, 2, ...
        n = 4
        run = run_gdb(["break jp_done", "ftrace *jp_probe", "actions", "collect $rdi", "end",
                       "trace *jp_probe+7", "actions", "collect $rdi", "end", "tstart", "continue",
                       "monitor gdbtrace status", "tstop", "tstatus"]
                      + [c for i in range(2 * n) for c in (f"tfind {i}", "print $rdi")],
                      program=PROG, args=(n,))
        self.assertEqual(sorted(backends(run)), ["ebpf", "jumppad"], run.transcript())
        self.assertOutput(run, rf"Collected {2 * n} trace frames")
        expected = []  # breakpoint 1 is jp_done's: the ftrace is tracepoint 2, the trace 3
        for i in range(2 * n):
            expected += [rf"Found trace frame {i}, tracepoint {2 + i % 2}\b", rf"= {i // 2}\b"]
        self.assertOrdered(run, expected)

    def test_a_tsv_both_collectors_add_to_is_their_sum(self):
        # `teval $n = $n + K` in the pad (ftrace) and in eBPF (trace at jp_probe+7): each keeps its
        # own copy; gdb must read the start value plus what both added, during and after the run.
        n = 10
        run = run_gdb(["break jp_done", "tvariable $n = 1000", "ftrace *jp_probe", "actions",
                       "collect $rdi", "teval $n = $n + 1", "end", "trace *jp_probe+7", "actions",
                       "collect $rdi", "teval $n = $n + 10", "end", "tstart", "continue",
                       "monitor gdbtrace status", "print $n", "tstop", "tstatus", "print $n"],
                      program=PROG, args=(n,))
        self.assertEqual(sorted(backends(run)), ["ebpf", "jumppad"], run.transcript())
        total = 1000 + 11 * n
        self.assertOrdered(run, [rf"\$1 = {total}\b", rf"Collected {2 * n} trace frames",
                                 rf"\$2 = {total}\b"])

    def test_a_tsv_another_tracepoint_reads_keeps_the_pad_off(self):
        # The pad's adds go to its own copy, which eBPF's `collect $n` would not see: the ftrace
        # goes to eBPF too (the status says why), and every frame holds the true value.
        n = 6
        run = run_gdb(["break jp_done", "tvariable $n = 1000", "ftrace *jp_probe", "actions",
                       "collect $rdi", "teval $n = $n + 1", "end", "trace *jp_probe+7", "actions",
                       "collect $rdi, $n", "end", "tstart", "continue", "monitor gdbtrace status",
                       "tstop", "print $n", "tfind tracepoint 3", "print $n", "tfind tracepoint 3",
                       "tfind tracepoint 3", "print $n"], program=PROG, args=(n,))
        self.assertEqual(backends(run), ["ebpf", "ebpf"], run.transcript())
        self.assertOutput(run, r"\(jumppad: tracepoint 3 reads or sets \$n, which this one adds to\)")
        self.assertOrdered(run, [rf"\$1 = {1000 + n}\b", r"\$2 = 1001\b", r"\$3 = 1003\b"])

    def test_a_tsv_split_by_a_collector_that_cannot_add_up_is_refused(self):
        # while-stepping only runs in the ptrace collector (the engine's copy of $n), the other
        # tracepoint in eBPF (its own): the stepping one reads $n, so the run is refused, with the
        # reason, rather than record values that miss eBPF's adds.
        run = run_gdb(["break jp_done", "tvariable $n = 0", "trace *jp_probe", "actions",
                       "while-stepping 1", "collect $n", "end", "end", "trace *jp_probe+7", "actions",
                       "teval $n = $n + 1", "end", "tstart", "info tracepoints"],
                      program=PROG, args=(3,))
        # (gdb shows the E reply's text; the remote protocol's `$` arrives as `?`)
        self.assertOutput(run, r"trace state variable .n is used by tracepoints that "
                               r"different collectors serve \(2 in ptrace, 3 in ebpf\) and "
                               r"tracepoint 2 reads or sets it")
        self.assertNotRegex(run.output, r"Trace is running")

    def test_trace_timestamp_is_no_kept_tsv(self):
        # $trace_timestamp is a clock each collector reads, not a copy kept per collector: read by
        # tracepoints in ptrace (while-stepping) and in eBPF, the run goes on.
        run = run_gdb(["break jp_done", "trace *jp_probe", "actions", "while-stepping 1",
                       "collect $trace_timestamp", "end", "end", "trace *jp_probe+7", "actions",
                       "collect $trace_timestamp", "end", "tstart", "continue",
                       "monitor gdbtrace status", "tstop", "tstatus"], program=PROG, args=(3,))
        self.assertEqual(sorted(backends(run)), ["ebpf", "ptrace"], run.transcript())
        self.assertNotRegex(run.output, r"different collectors serve")
        self.assertOutput(run, r"Collected \d+ trace frames")

    def test_unpatchable_site_falls_back_with_the_reason(self):
        # jp_done is a 1-byte `ret` (0xc3) at -O2.
        run = run_gdb(["break jp_probe", "ftrace *jp_done", "actions", "collect $rdi", "end",
                       "tstart", "monitor gdbtrace status", "tstop"], program=PROG, args=(1,))
        # Said in the status row, not on the console (most ftrace sites of unoptimised code fall
        # back: gdb's own tests expect `tstart` to print nothing).
        self.assertOutput(run, r"tracepoint \d+ at 0x[0-9a-f]+.*: backend \w+, .*\(jumppad: the "
                               r"instruction at the site is not one the jump pad relocates")
        self.assertNotRegex(run.output.split("trace running")[0], r"jumppad: ")
        self.assertNotIn("jumppad", backends(run), run.transcript())
        forced = run_gdb(["monitor gdbtrace backend jumppad", "break jp_probe", "ftrace *jp_done",
                          "tstart"], program=PROG, args=(1,))
        self.assertOutput(forced, r"jumppad: the instruction at the site is not one the jump pad "
                                  r"relocates")

    def test_threads_running_the_function(self):
        # Two threads call jp_probe in a loop; the run starts with every thread stopped wherever it
        # was (some inside jp_probe, one at its first byte), the jump is written, they go on
        # through it, and tstop puts the bytes back under them.
        run = run_gdb(["break jp_probe if x == 300", "continue", "delete", "break jp_done",
                       "ftrace *jp_probe", "actions", "collect $rdi", "end", "tstart", "continue",
                       "monitor gdbtrace status", "tstop", "tstatus", "x/3xb jp_probe", "continue"],
                      program=PROG, args=(200000, 2))
        self.assertEqual(backends(run)[:1], ["jumppad"], run.transcript())
        self.assertOrdered(run, [r"Breakpoint 1, jp_probe \(x=(x@entry=)?300\)",
                                 r"Collected [1-9]\d* trace frames", FIRST_BYTES,
                                 r"exited normally"])
        self.assertRegex(run.server_log, r"BENCH jumppad calls=200000 sum=%d worker_calls=[1-9]"
                         % (sum(range(200000)) + 3 * 200000))

    def test_site_restored_at_the_next_stop_after_a_full_buffer(self):
        # Two threads fill gdb's default buffer within milliseconds; the run stops at a drain while
        # they run, when the stub may not write the site: the jmp stays (its pad now only runs the
        # instruction) until the process next stops, here at jp_done three seconds later, and gdb
        # then reads the program's own bytes.
        run = run_gdb(["break jp_done", "ftrace *jp_probe", "actions", "collect $rdi", "end",
                       "tstart", "continue", "tstatus", "x/3xb jp_probe", "continue"],
                      program=PROG, args=(300, 2, 10000))
        self.assertOrdered(run, [r"Breakpoint 1, jp_done", r"Trace stopped because the buffer was full",
                                 FIRST_BYTES, r"exited normally"])
        self.assertRegex(run.server_log, r"BENCH jumppad calls=300 .* worker_bad=0")

    def test_program_runs_on_when_the_stub_is_killed(self):
        before = descendants()
        # 300 calls 10 ms apart: the stub is killed while the jump is in.
        tracee = Tracee(program(PROG), args=(300, 0, 10000))
        try:
            time.sleep(0.3)
            with Server("attach", pid=tracee.pid) as server:
                run = run_gdb(["ftrace *jp_probe", "actions", "collect $rdi", "end", "tstart",
                               "monitor gdbtrace status", f"shell kill -9 {server.proc.pid}"],
                              program=PROG, server=server)
                self.assertEqual(backends(run)[:1], ["jumppad"], run.transcript())
                server.proc.wait(timeout=10)
            os.kill(tracee.pid, 18)  # SIGCONT, in case the tracer's death left it group-stopped
            out, _ = tracee.proc.communicate(timeout=30)
            self.assertEqual(tracee.proc.returncode, 0, out)
            self.assertRegex(out.decode(), r"BENCH jumppad calls=300 sum=%d " % (sum(range(300)) + 900))
        finally:
            tracee.kill()
            kill_new_processes(before)

    def test_detach_puts_the_bytes_back(self):
        # Attached (no preload), traced, detached: the process's own code at jp_probe is the
        # original again (read from /proc/PID/mem after gdb left), and the program finishes.
        before = descendants()
        tracee = Tracee(program(PROG), args=(100, 0, 10000))
        try:
            time.sleep(0.3)
            with Server("attach", pid=tracee.pid) as server:
                # gdb's reads show the original bytes (the stub hides the jmp); the process's own
                # memory, read past the stub, has the jmp.
                run = run_gdb(["ftrace *jp_probe", "actions", "collect $rdi", "end", "tstart",
                               "monitor gdbtrace status", "x/1xb jp_probe",
                               "python f = open('/proc/%d/mem' % gdb.selected_inferior().pid, 'rb'); "
                               "f.seek(int(gdb.parse_and_eval('(long)&jp_probe'))); "
                               "print('SITE-BYTE', f.read(1).hex())",
                               "print/x (long)&jp_probe", "detach"], program=PROG, server=server)
                self.assertEqual(backends(run)[:1], ["jumppad"], run.transcript())
                self.assertOrdered(run, [r"<jp_probe>:\s+0x48", r"SITE-BYTE e9"])
                address = int(re.search(r"\$1 = (0x[0-9a-f]+)", run.output).group(1), 16)
            with open(f"/proc/{tracee.pid}/mem", "rb") as mem:
                mem.seek(address)
                self.assertEqual(mem.read(3), bytes([0x48, 0x8b, 0x05]))
            out, _ = tracee.proc.communicate(timeout=30)
            self.assertEqual(tracee.proc.returncode, 0, out)
            self.assertRegex(out.decode(), r"BENCH jumppad calls=100 sum=%d " % (sum(range(100)) + 300))
        finally:
            tracee.kill()
            kill_new_processes(before)


if __name__ == "__main__":
    unittest.main()
