"""Ordinary debugging through the stub: breakpoints, stepping, registers, memory, expressions,
`run` twice in one --multi session, stdio transport, plain `target remote`."""

import unittest

from gdbtest import GdbTestCase, run_gdb


class BreakAndStep(GdbTestCase):
    def test_break_continue_backtrace(self):
        run = run_gdb(["break step_particle", "continue", "bt", "continue", "info breakpoints"],
                      program="demo", args=(3, 0))
        self.assertOrdered(run, [r"Breakpoint 1, step_particle \(p=0x[0-9a-f]+ <particles>, tick=0\)",
                                 r"#0  step_particle .* at .*demo\.c:\d+",
                                 r"#1  0x[0-9a-f]+ in main \(argc=3",
                                 r"Breakpoint 1, step_particle \(p=0x[0-9a-f]+ <particles\+\d+>, tick=1\)",
                                 r"breakpoint already hit 2 times"])

    def test_step_next_finish(self):
        run = run_gdb(["break add", "continue", "finish", "next", "next", "info frame", "continue"],
                      program="hello", args=("a",))
        self.assertOrdered(run, [r"Breakpoint 1, add \(a=2, b=40\)",
                                 r"in main \(argc=2, .*hello\.c:7",
                                 r"Value returned is \$1 = 42",
                                 r"^8\s+for \(int i = 0; i < argc; i\+\+\)",
                                 r"^9\s+printf\(\"sum=%d",
                                 r"Stack level 0, frame at 0x[0-9a-f]+:\s+rip = 0x[0-9a-f]+ in main",
                                 r"exited with code 02"])
        self.assertServerLog(run, r"arg1=a")

    def test_step_into_and_next_over(self):
        run = run_gdb(["break demo.c:62", "continue", "next", "step", "bt 1", "up", "next", "info line"],
                      program="demo", args=(3, 0))
        self.assertOrdered(run, [r"Breakpoint 1, main .* at .*demo\.c:62",
                                 r"^63\s+checksum \+= step_particle",
                                 r"step_particle \(p=0x[0-9a-f]+ <particles>, tick=0\) at .*demo\.c:\d+",
                                 r"#0  step_particle"])

    def test_until_and_advance(self):
        run = run_gdb(["break main", "continue", "advance step_particle", "until 35", "print total_steps"],
                      program="demo", args=(3, 0))
        self.assertOrdered(run, [r"step_particle \(p=", r"^35\s+total_steps\+\+;", r"\$1 = 0"])

    def test_tbreak_delete_disable(self):
        run = run_gdb(["tbreak step_particle", "break step_particle", "disable 2", "continue",
                       "enable 2", "continue", "delete", "continue"],
                      program="demo", args=(3, 0))
        self.assertOrdered(run, [r"Temporary breakpoint 1, step_particle .*tick=0",
                                 r"Breakpoint 2, step_particle .*tick=1",
                                 r"\[Inferior 1 \(process \d+\) exited normally\]"])
        self.assertServerLog(run, r"demo done: 3 steps")


class RegistersAndMemory(GdbTestCase):
    def test_info_registers(self):
        run = run_gdb(["break step_particle", "continue", "info registers", "info registers rip",
                       "print $pc == $rip", "print/x $eflags", "info registers fs_base gs_base",
                       "info all-registers ymm0"],
                      program="demo", args=(3, 0))
        for reg in ["rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", "r8", "r15", "rip", "eflags",
                    "cs", "ss", "fs_base", "gs_base"]:
            self.assertOutput(run, rf"^{reg}\s+0x[0-9a-f]+", f"register {reg} missing")
        # fs_base is the TLS pointer of a live thread: never 0 in a linked, running program.
        self.assertOutputs(run, [r"^rip\s+0x[0-9a-f]+\s+0x[0-9a-f]+ <step_particle\+\d+>",
                                 r"^eflags\s+0x[0-9a-f]+\s+\[.*\]", r"^fs_base\s+0x[1-9a-f][0-9a-f]+",
                                 r"\$1 = 1", r"ymm0\s+\{v16_bfloat16|ymm0\s+\{v8_float"])

    def test_write_register_and_memory(self):
        run = run_gdb(["break add", "continue", "set var a = 100", "print a", "set var $rax = 0x1234",
                       "print/x $rax", "finish", "continue"],
                      program="hello", args=("a",))
        self.assertOrdered(run, [r"\$1 = 100", r"\$2 = 0x1234", r"Value returned is \$3 = 140"])
        self.assertServerLog(run, r"sum=140")

    def test_examine_memory(self):
        run = run_gdb(["break step_particle", "continue", "x/4xb &particles[1].id",
                       "x/s particles[2].name", "x/2i $pc", "x/2gx $sp", "output particles[3].id"],
                      program="demo", args=(3, 0))
        self.assertOrdered(run, [r"<particles\+\d+>:\s+0x01\s+0x00\s+0x00\s+0x00",
                                 r"<particles\+\d+>:\s+\"particle-2\"",
                                 r"=> 0x[0-9a-f]+ <step_particle\+\d+>:\s+\w+",
                                 r"0x[0-9a-f]+:\s+0x[0-9a-f]+\s+0x[0-9a-f]+",
                                 r"^3"])

    def test_print_struct_and_array(self):
        run = run_gdb(["break step_particle", "continue", "print *p", "print p->pos",
                       "print particles[1]", "print particles[1].name", "print/x particles[5].id",
                       "print sizeof(particles)/sizeof(particles[0])", "ptype struct particle",
                       "print particles[0].vel.x * 2", "print $_siginfo"],
                      program="demo", args=(3, 0))
        self.assertOrdered(run, [
            r"\$1 = \{id = 0, name = \"particle-0(\\000)*\", pos = \{x = 0, y = 0\}, "
            r"vel = \{x = 1\.5, y = 0\}, hits = 0\}",
            r"\$2 = \{x = 0, y = 0\}",
            r"\$3 = \{id = 1, name = \"particle-1(\\000)*\", pos = \{x = 10, y = 5\}, vel = \{x = 2\.5, y = 0\.5\}",
            r"\$4 = \"particle-1(\\000)*\"",
            r"\$5 = 0x5",
            r"\$6 = 8",
            r"type = struct particle \{\s+int id;\s+char name\[16\];\s+struct vec pos;",
            r"\$7 = 3"])

    def test_call_function_in_inferior(self):
        run = run_gdb(["break step_particle", "continue", "delete", "print step_particle(&particles[4], 3)",
                       "print particles[4].hits", "print total_steps"],
                      program="demo", args=(3, 0))
        self.assertOrdered(run, [r"\$1 = 1", r"\$2 = 1", r"\$3 = 1"])


class Sessions(GdbTestCase):
    def test_run_twice_in_multi_session(self):
        run = run_gdb(["break add", "run", "print a", "continue", "set args x y", "run", "print a",
                       "continue", "info inferiors"],
                      program="hello", mode="multi")
        self.assertOrdered(run, [r"Breakpoint 1, add \(a=1, b=40\)", r"\$1 = 1",
                                 r"exited with code 01",
                                 r"Breakpoint 1, add \(a=3, b=40\)", r"\$2 = 3",
                                 r"exited with code 03"])
        self.assertServerLog(run, r"arg1=x")

    def test_kill_and_rerun(self):
        run = run_gdb(["break step_particle", "run", "kill", "info inferiors", "run", "print tick"],
                      program="demo", args=(3, 0), mode="multi")
        self.assertOrdered(run, [r"Breakpoint 1, step_particle", r"\[Inferior 1 \(process \d+\) killed\]",
                                 r"Breakpoint 1, step_particle", r"\$1 = 0"])

    def test_stdio_transport(self):
        run = run_gdb(["break add", "continue", "print a + b", "continue"],
                      program="hello", args=("a", "b"), mode="stdio", extended=False)
        self.assertOrdered(run, [r"Breakpoint 1, add \(a=3, b=40\)",
                                 r"\$1 = 43", r"exited with code 03"])

    def test_stdio_extended(self):
        run = run_gdb(["break add", "continue", "continue"], program="hello", mode="stdio")
        self.assertOrdered(run, [r"Breakpoint 1, add \(a=1, b=40\)", r"exited with code 01"])

    def test_plain_remote_once(self):
        run = run_gdb(["break add", "continue", "continue"], program="hello", args=("q",),
                      extended=False)
        self.assertOrdered(run, [r"Breakpoint 1, add \(a=2, b=40\)",
                                 r"exited with code 02"])

    def test_program_output_and_exit_code(self):
        run = run_gdb(["continue"], program="hello", args=("one", "two", "three"))
        self.assertOutput(run, r"\[Inferior 1 \(process \d+\) exited with code 04\]")
        self.assertServerLog(run, r"arg3=three")

    def test_monitor_help_is_answered(self):
        # gdbserver and gdbtrace-server both implement `monitor help`; the reply must not be an error.
        run = run_gdb(["monitor help"], program="hello")
        self.assertOutput(run, r"monitor|exit|help")
        self.assertNoOutput(run, r"Target does not support this command")


if __name__ == "__main__":
    unittest.main()
