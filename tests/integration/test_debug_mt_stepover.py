"""Several threads hitting one breakpoint: gdb steps each over it (a false condition makes that
happen on every hit). `detach` or `interrupt` arriving while a thread is in the middle of a
step-over must leave the program intact: every call runs exactly once and it exits normally."""

import time
import unittest

from gdbtest import GdbTestCase, Server, Tracee, descendants, kill_new_processes, mi_connected, \
    process_state, program, run_gdb, tracer_pid


class DetachDuringStepOver(GdbTestCase):
    def _check_detached_and_finishes(self, run, tracee):
        self.assertNoOutput(run, r"(?i)internal.error|Remote failure reply|Remote connection closed")
        self.assertOutput(run, r"\[Inferior 1 \(process \d+\) detached\]")
        self.assertEqual(tracer_pid(tracee.pid), 0, run.transcript())
        try:
            out, _ = tracee.proc.communicate(timeout=30)
        except Exception:
            self.fail(f"program did not finish after detach (state {process_state(tracee.pid)})\n"
                      + run.transcript())
        text = out.decode(errors="replace")
        self.assertRegex(text, r"mt_bpstep done: 12000 calls \(expected 12000\)", run.transcript())
        self.assertEqual(tracee.proc.returncode, 0, text)

    def _attach_run_detach(self, condition_eval, breakpoint, hits):
        before = descendants()
        tracee = Tracee(program("mt_bpstep"), args=(3000, 4))
        try:
            time.sleep(0.2)
            with Server("multi") as server:
                commands = [f"set breakpoint condition-evaluation {condition_eval}",
                            f"attach {tracee.pid}", breakpoint] + ["continue"] * hits + ["detach"]
                run = run_gdb(commands, program="mt_bpstep", server=server, timeout=90)
            self._check_detached_and_finishes(run, tracee)
            return run
        finally:
            tracee.kill()
            kill_new_processes(before)

    def test_detach_after_hits_of_shared_breakpoint(self):
        run = self._attach_run_detach("host", "break hit", 6)
        self.assertOutput(run, r"Thread \S+ \S+ hit Breakpoint 1, hit \(|Breakpoint 1, hit \(")

    def test_detach_with_condition_evaluated_by_gdb(self):
        # Only every 40th iteration of a thread stops; every other hit is stepped over by gdb.
        run = self._attach_run_detach("host", "break hit if iteration % 40 == 0", 3)
        self.assertOutput(run, r"hit \(index=\d, iteration=\d*0\)")

    def test_detach_with_condition_evaluated_by_stub(self):
        run = self._attach_run_detach("target", "break hit if iteration % 40 == 0", 3)
        self.assertOutput(run, r"hit \(index=\d, iteration=\d*0\)")


class InterruptDuringStepOver(GdbTestCase):
    """gdb.threads/interrupt-while-step-over.exp: ^C while threads are being stepped over a breakpoint
    whose condition is false stops everything with one SIGINT report, and nothing is lost."""

    def test_interrupt_while_threads_step_over_false_condition(self):
        self._interrupt_while_stepping_over("host")

    def test_interrupt_while_stub_steps_over_false_condition(self):
        # The stub evaluates the condition and resumes the thread itself (its step over the int3 is
        # done in place, the other threads running on).
        self._interrupt_while_stepping_over("target")

    def _interrupt_while_stepping_over(self, condition_eval):
        with mi_connected("mt_bpstep", args=(2000, 4), mode="once", setup=["-gdb-set mi-async on"]) as mi:
            mi.send(f"-gdb-set breakpoint condition-evaluation {condition_eval}")
            self.assertEqual(mi.send("-break-insert -c \"iteration < 0\" hit").cls, "done")
            for _ in range(3):
                stop = mi.continue_and_interrupt(run_for=0.4)
                self.assertEqual(stop.results.get("reason"), "signal-received", stop.line)
                self.assertEqual(stop.results.get("signal-name"), "SIGINT", stop.line)
                threads = mi.send("-thread-info").results["threads"]
                self.assertTrue(all(t["state"] == "stopped" for t in threads), threads)
            mi.send("-break-delete")
            mark = len(mi.records)
            mi.send("-exec-continue")
            stop = mi.wait_stopped(mark, timeout=60)
            self.assertEqual(stop.results.get("reason"), "exited-normally", stop.line)
            self.assertRegex(mi.server.log(), r"mt_bpstep done: 8000 calls \(expected 8000\)")

    def test_non_stop_interrupt_all_while_stub_evaluates_false_condition(self):
        """Non-stop `interrupt -a` (one vCont;t per thread) while threads keep hitting a
        breakpoint whose false condition the stub evaluates: a thread whose hit was in flight
        must still answer gdb's stop request (it was resumed instead, and gdb waited forever)."""
        setup = ["-gdb-set non-stop on", "-gdb-set mi-async on"]
        with mi_connected("mt_bpstep", args=(400000, 8, 0), mode="once", setup=setup) as mi:
            mi.send("-gdb-set breakpoint condition-evaluation target")
            self.assertEqual(mi.send("-break-insert -c \"iteration < 0\" hit").cls, "done")
            for _ in range(3):
                self.assertEqual(mi.send("-exec-continue --all").cls, "running")
                time.sleep(0.3)
                mi.send("-exec-interrupt --all")
                deadline = time.time() + 20
                while True:
                    threads = mi.send("-thread-info").results["threads"]
                    running = [t["id"] for t in threads if t["state"] != "stopped"]
                    if not running or time.time() > deadline:
                        break
                    time.sleep(0.2)
                self.assertEqual(running, [], "threads never stopped after interrupt -a")
            mi.send("-break-delete")
            mark = len(mi.records)
            mi.send("-exec-continue --all")
            stop = mi.wait_stopped(mark, timeout=60)
            while stop.results.get("reason") != "exited-normally":  # threads' own stops first
                stop = mi.wait_stopped(mi.records.index(stop) + 1, timeout=60)
            self.assertRegex(mi.server.log(), r"mt_bpstep done: 3200000 calls \(expected 3200000\)")


class AbandonedStepEvents(GdbTestCase):
    def test_next_while_other_threads_hit_the_breakpoint(self):
        """`next` in one thread while others hit the same breakpoint: gdb abandons a step when
        another thread's hit comes first, and later continues that thread. The step's end,
        collected meanwhile, must not reach gdb as a SIGTRAP (gdb.threads/pending-step.exp)."""
        run = run_gdb(["break hit", "continue"] + ["next"] * 40 + ["delete", "continue"],
                      program="mt_bpstep", args=(300, 4), timeout=120)
        self.assertNoOutput(run, r"received signal SIGTRAP")
        self.assertOutput(run, r"exited normally")
        self.assertServerLog(run, r"mt_bpstep done: 1200 calls \(expected 1200\)")


if __name__ == "__main__":
    unittest.main()
