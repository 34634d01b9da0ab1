"""A session through gdb's MI interpreter, the way an IDE (VS Code cpptools, CLion) drives it:
connect first, then load the program, set the remote exec-file, break, run, inspect, continue."""

import time
import unittest

from gdbtest import GdbTestCase, MiSession, Server, descendants, kill_new_processes, program


class IdeStyleSession(GdbTestCase):
    def setUp(self):
        self.before = descendants()
        self.server = Server("multi")
        self.mi = MiSession(timeout=30)

    def tearDown(self):
        self.mi.close()
        self.server.__exit__()
        kill_new_processes(self.before)

    def transcript(self):
        return "\n".join(self.mi.transcript) + "\n--- server log ---\n" + self.server.log()

    def send_ok(self, command, expect="done"):
        rec = self.mi.send(command)
        if rec.cls != expect:
            self.fail(f"{command} -> {rec.line} (expected ^{expect})\n{self.transcript()}")
        return rec

    def run_to_stop(self, command):
        mark = len(self.mi.records)
        self.send_ok(command, "running")
        return self.mi.wait_stopped(mark)

    def test_ide_session(self):
        demo = program("demo")
        mi = self.mi
        self.send_ok("-gdb-set mi-async on")
        self.send_ok(f"-target-select extended-remote {self.server.address}", "connected")
        self.send_ok(f"-file-exec-and-symbols {demo}")
        self.send_ok(f"-gdb-set remote exec-file {demo}")
        self.send_ok("-exec-arguments 5 0")
        bkpt = self.send_ok("-break-insert -f step_particle").results["bkpt"]
        self.assertEqual(bkpt["func"], "step_particle")

        stop = self.run_to_stop("-exec-run")
        self.assertEqual(stop.results["reason"], "breakpoint-hit", self.transcript())
        self.assertEqual(stop.results["frame"]["func"], "step_particle")
        self.assertEqual(stop.results["bkptno"], bkpt["number"])

        frames = self.send_ok("-stack-list-frames").results["stack"]
        self.assertEqual([f["func"] for _, f in frames[:2]], ["step_particle", "main"])
        self.assertTrue(frames[1][1]["file"].endswith("demo.c"))

        threads = self.send_ok("-thread-info").results
        self.assertEqual(len(threads["threads"]), 1, threads)  # workers already joined
        self.assertEqual(threads["threads"][0]["state"], "stopped")
        self.assertEqual(threads["current-thread-id"], threads["threads"][0]["id"])

        args = self.send_ok("-stack-list-arguments --simple-values 0 0").results["stack-args"]
        self.assertEqual(args[0][1]["args"][1], {"name": "tick", "type": "int", "value": "0"})

        var = self.send_ok("-var-create - * *p").results
        self.assertEqual(var["type"], "struct particle")
        self.assertEqual(var["numchild"], "5")
        children = self.send_ok(f"-var-list-children --all-values {var['name']}").results["children"]
        by_exp = {c["exp"]: c for _, c in children}
        self.assertEqual(sorted(by_exp), ["hits", "id", "name", "pos", "vel"])
        self.assertEqual(by_exp["id"]["value"], "0")
        self.assertEqual(by_exp["name"]["type"], "char [16]")
        name = self.send_ok(f"-var-evaluate-expression {by_exp['name']['name']}").results["value"]
        self.assertEqual(name, "[16]")
        pos = self.send_ok(f"-var-list-children --all-values {by_exp['pos']['name']}").results["children"]
        self.assertEqual([(c["exp"], c["value"]) for _, c in pos], [("x", "0"), ("y", "0")])

        array = self.send_ok("-var-create arr * particles").results
        self.assertEqual(array["numchild"], "8")
        elems = self.send_ok("-var-list-children arr 2 4").results["children"]
        self.assertEqual([c["exp"] for _, c in elems], ["2", "3"])

        value = self.send_ok("-data-evaluate-expression particles[3].pos.x").results["value"]
        self.assertEqual(value, "30")
        regs = self.send_ok("-data-list-register-values x 16").results["register-values"]
        self.assertTrue(regs[0]["value"].startswith("0x"), regs)
        mem = self.send_ok("-data-read-memory-bytes &particles[1].id 4").results["memory"]
        self.assertEqual(mem[0]["contents"], "01000000")

        stop = self.run_to_stop("-exec-continue")
        self.assertEqual(stop.results["reason"], "breakpoint-hit")
        self.send_ok(f"-var-update --all-values {var['name']}")
        frame_args = stop.results["frame"]["args"]
        self.assertEqual(frame_args[1], {"name": "tick", "value": "1"})

        stop = self.run_to_stop("-exec-finish")
        self.assertEqual(stop.results["reason"], "function-finished", stop.line)
        self.assertEqual(stop.results["frame"]["func"], "main")

        stop = self.run_to_stop("-exec-next")
        self.assertEqual(stop.results["reason"], "end-stepping-range")

        self.send_ok(f"-break-delete {bkpt['number']}")
        stop = self.run_to_stop("-exec-continue")
        self.assertEqual(stop.results["reason"], "exited-normally", self.transcript())
        self.assertIn("demo done: 5 steps", self.server.log())

    def test_interrupt_running_program(self):
        loop = program("loop")
        self.send_ok("-gdb-set mi-async on")
        self.send_ok(f"-target-select extended-remote {self.server.address}", "connected")
        self.send_ok(f"-file-exec-and-symbols {loop}")
        self.send_ok(f"-gdb-set remote exec-file {loop}")
        self.send_ok("-exec-arguments - 30")
        # Run to the loop first, so the time before the interrupt is not spent in the dynamic loader.
        tick_bp = self.send_ok("-break-insert tick").results["bkpt"]
        stop = self.run_to_stop("-exec-run")
        self.assertEqual(stop.results["frame"]["func"], "tick", stop.line)
        self.send_ok(f"-break-delete {tick_bp['number']}")
        mark = len(self.mi.records)
        self.send_ok("-exec-continue", "running")
        self.mi.wait_for("*", "running", since=mark)
        time.sleep(0.5)
        mark = len(self.mi.records)
        self.send_ok("-exec-interrupt")
        stop = self.mi.wait_stopped(mark)
        self.assertEqual(stop.results.get("signal-name"), "SIGINT", stop.line)
        ticks = int(self.send_ok("-data-evaluate-expression ticks").results["value"])
        self.assertGreater(ticks, 1, self.transcript())
        self.send_ok("kill")


if __name__ == "__main__":
    unittest.main()
