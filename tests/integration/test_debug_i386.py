"""i386 (gcc -m32) programs on this x86-64 host, as stock gdbserver 13 debugs them: the i386-linux
target description (core, sse, linux with orig_eax, avx), registers in the i386 'g' layout (read and
written), globals, locals, step/next/finish, a hardware watchpoint, threads and thread-local
variables (qGetTLSAddr through the host's libthread_db), the 32-bit $_siginfo layout, and a 64-bit
program that execs the i386 one (gdb re-reads the description after the exec stop).

`GDBTRACE_SERVER=/usr/bin/gdbserver python3 -m unittest test_debug_i386` runs the same tests
against stock gdbserver (they pass there)."""

import re
import unittest

from gdbtest import NO_DEBUG_TRAPS, GdbTestCase, machine_delivers_debug_traps, run_gdb

PROGRAM = "m32_demo"


class I386Debugging(GdbTestCase):
    def test_registers_at_main(self):
        run = run_gdb(["break main", "continue", "bt", "show architecture", "info registers",
                       "p $orig_eax", "p sizeof(void *)", "p $pc == &main || $pc > &main",
                       "p/x $xmm1.v4_int32", "p $ymm0.v8_int32[0]", "info registers orig_eax",
                       "p $fs_base", "p $rip"],
                      program=PROGRAM)
        self.assertOrdered(run, [r"Breakpoint 1, main \(argc=1, argv=0x[0-9a-f]+\) at .*m32_demo\.c:\d+",
                                 r"#0  main \(argc=1",
                                 r'The target architecture is set to "auto" \(currently "i386"\)'])
        # The general registers in gdb's i386 order, 32 bits wide.
        names = re.findall(r"^(\w+)\s+0x[0-9a-f]+", run.stdout, re.M)
        self.assertEqual(names[:16], ["eax", "ecx", "edx", "ebx", "esp", "ebp", "esi", "edi", "eip",
                                      "eflags", "cs", "ss", "ds", "es", "fs", "gs"], run.transcript())
        self.assertOutput(run, r"^eip\s+0x5[0-9a-f]{7}\s+0x[0-9a-f]+ <main\+\d+>")
        self.assertOutput(run, r"^cs\s+0x23\s+35$")  # the 32-bit user code segment
        self.assertOutput(run, r"^esp\s+0xff[0-9a-f]{6}\s")
        self.assertOutput(run, r"^\$1 = -1$")  # orig_eax: not in a system call
        self.assertOutput(run, r"^\$2 = 4$")
        self.assertOutput(run, r"^\$3 = 1$")
        self.assertOutput(run, r"^\$4 = \{0x0, 0x0, 0x0, 0x0\}$")
        self.assertOutput(run, r"^orig_eax\s+0xffffffff\s+-1$")
        # No amd64 register in an i386 description (gdbserver sends no segments feature either).
        self.assertOutput(run, r"^\$6 = void$")
        self.assertOutput(run, r"^\$7 = void$")
        self.assertNotIn("Remote 'g' packet reply is too long", run.output, run.transcript())

    def test_globals_locals_step_finish(self):
        run = run_gdb(["break add", "continue", "bt", "p a", "p b", "finish", "p counter",
                       "p ratio", "p wide", "p greeting", "next", "step", "bt", "up", "p local",
                       "info frame"],
                      program=PROGRAM)
        self.assertOrdered(run, [r"Breakpoint 1, add \(a=41, b=1\) at .*m32_demo\.c:\d+",
                                 r"#0  add \(a=41, b=1\)", r"#1  0x[0-9a-f]{8} in main \(argc=1",
                                 r"^\$1 = 41$", r"^\$2 = 1$",
                                 r"Value returned is \$3 = 42",
                                 r"^\$4 = 42$", r"^\$5 = 2\.5$", r"^\$6 = 20015998343868$",
                                 r'^\$7 = 0x[0-9a-f]+ "hello i386"$',
                                 r"^\d+\s+local = add\(local, 2\);",
                                 r"Breakpoint 1, add \(a=42, b=2\) at .*m32_demo\.c",
                                 r"#0  add \(a=42, b=2\)", r"#1  0x[0-9a-f]{8} in main",
                                 r"^\$8 = 42$", r"eip = 0x[0-9a-f]{8} in main"])

    def test_register_writes(self):
        """gdb writes registers ('P'/'G' in the i386 layout): `return` pops add's frame and sets
        eax; `set $ecx` round-trips; the program goes on with the forced value."""
        run = run_gdb(["break add", "continue", "return 99", "next", "p local", "set $ecx = 0x12345678",
                       "p/x $ecx", "set $eax = -5", "p $eax", "p/x $orig_eax", "delete",
                       "continue"],
                      program=PROGRAM)
        self.assertOrdered(run, [r"Breakpoint 1, add \(a=41, b=1\)", r"^\$1 = 99$", r"^\$2 = 0x12345678$",
                                 r"^\$3 = -5$", r"^\$4 = 0xffffffff$",
                                 r"exited normally"])
        # main went on from the forced value: add(99, 2) (the first add's body never ran).
        self.assertServerLog(run, r"counter=101 local=101 hello i386")

    def test_watchpoint(self):
        commands = ["break main", "continue", "watch counter", "continue", "continue", "bt 1",
                    "delete", "continue"]
        if not machine_delivers_debug_traps():
            run = run_gdb(commands, program=PROGRAM)
            for pattern in (r"Could not insert hardware", NO_DEBUG_TRAPS):
                self.assertOutput(run, pattern)
            return
        run = run_gdb(commands, program=PROGRAM)
        self.assertOrdered(run, [r"Hardware watchpoint 2: counter",
                                 r"Old value = 0\s+New value = 42", r"add \(a=41, b=1\)",
                                 r"Old value = 42\s+New value = 86", r"#0  add \(a=42, b=2\)",
                                 r"exited normally"])

    def test_threads_and_tls(self):
        run = run_gdb(["break worker_ready", "continue", "info threads", "p tls_value", "thread 2",
                       "bt", "p tls_value", "p $_siginfo.si_signo"],
                      program=PROGRAM)
        self.assertOrdered(run, [r"worker_ready \(\) at .*m32_demo\.c",
                                 r"\* 1\s+Thread \d+\.\d+ .*worker_ready \(\)",
                                 r"^  2\s+Thread \d+\.\d+ ",
                                 r"^\$1 = 7$",
                                 r"Switching to thread 2",
                                 r"in worker \(arg=0x0\) at .*m32_demo\.c",
                                 r"^\$2 = 11$"])

    def test_siginfo_of_a_fault(self):
        """$_siginfo in the i386 layout: si_addr is a 4-byte field at offset 12 there."""
        run = run_gdb(["continue", "p $_siginfo.si_signo", "p $_siginfo.si_code",
                       "p $_siginfo._sifields._sigfault.si_addr", "p $_siginfo._sifields._sigfault._addr_lsb",
                       "set $_siginfo._sifields._sigfault.si_addr = (void *) 0x20",
                       "p $_siginfo._sifields._sigfault.si_addr", "p $_siginfo.si_signo", "kill"],
                      program=PROGRAM, args=("fault",))
        self.assertOrdered(run, [r"Program received signal SIGSEGV",
                                 r"^\$1 = 11$", r"^\$2 = 1$", r"^\$3 = \(void \*\) 0x10$", r"^\$4 = 0$",
                                 r"^\$5 = \(void \*\) 0x20$", r"^\$6 = 11$"])


class ExecOfAnI386Program(GdbTestCase):
    def test_64bit_program_execs_i386_one(self):
        """gdb follows the exec and reads the new process's description (i386 after i386:x86-64)."""
        run = run_gdb(["break main", "continue", "show architecture", "p sizeof(void *)", "catch exec",
                       "continue", "show architecture", "p $eip == $pc", "break add", "continue", "continue", "bt",
                       "p a", "info registers eip", "delete", "continue"],
                      program="exec_to_m32")
        self.assertOrdered(run, [r'currently "i386:x86-64"', r"^\$1 = 8$",
                                 r"process \d+ is executing new program: .*m32_demo",
                                 r'currently "i386"', r"^\$2 = 1$",
                                 r"Breakpoint 1, main \(argc=1, argv=0x[0-9a-f]{8}\) at .*m32_demo\.c",
                                 r"Breakpoint 3, add \(a=41, b=1\)", r"#1  0x[0-9a-f]{8} in main",
                                 r"^\$3 = 41$", r"^eip\s+0x[0-9a-f]{8}\s+0x[0-9a-f]{8} <add\+\d+>",
                                 r"exited normally"])


if __name__ == "__main__":
    unittest.main()
