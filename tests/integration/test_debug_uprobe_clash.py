"""A breakpoint another program's uprobe takes out. The kernel takes any int3 at a uprobe's address
for the uprobe's own: when a uprobe on the instruction of a gdb breakpoint is removed (bpftrace,
`perf probe`, another stub tracing the same executable), the kernel writes the file's instruction
back into every process that maps the file and has had a uprobe, and the breakpoint is silently
gone (stock gdbserver's too). The stub reads its int3s back before each resume and every 200 ms
while the program runs, puts back the ones the kernel took out, and tells gdb's console.

Tracee: tests/programs/late_call.c (waits for a file, then calls late_target() three times)."""

import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import unittest
from pathlib import Path

from gdbtest import GDB, GdbTestCase, Server, address_file_offset, program, run_gdb

TRACEFS = Path("/sys/kernel/tracing")


def mount_tracefs():
    """A machine may boot without tracefs mounted (this project's CI VM did): mount it, as root
    may, as bench/_lib.sh's bench_tracefs does."""
    if not (TRACEFS / "uprobe_events").exists():
        subprocess.run(["mount", "-t", "tracefs", "nodev", str(TRACEFS)], capture_output=True)
    return (TRACEFS / "uprobe_events").exists()


def append_line(path, line):
    """tracefs files refuse the seek to their end that Python's append mode does."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def load_base(pid, path):
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[5] == path and int(fields[2], 16) == 0:
            return int(fields[0].split("-")[0], 16)
    return None


class UprobeClash(threading.Thread):
    """Waits until the stub's int3 is at the breakpoint's address in the tracee, then adds a
    tracefs uprobe on that instruction, enables it, disables and removes it (the kernel's removal
    writes the original instruction back over the int3), waits until the int3 is back and only
    then creates GO_FILE, which lets the tracee call the function."""

    def __init__(self, server, path, link_vaddr, go_file):
        super().__init__(daemon=True)
        self.server, self.path, self.link_vaddr, self.go_file = server, path, link_vaddr, go_file
        self.event = f"gdbtrace_clash_{id(self) & 0xffffff:x}"
        self.done = False
        self.error = None

    def run(self):
        try:
            pid = self.tracee_pid()
            base = None
            deadline = time.time() + 60
            while time.time() < deadline:
                base = base or load_base(pid, self.path)
                if base is not None and self.byte_at(pid, base + self.link_vaddr) == 0xcc:
                    break
                time.sleep(0.01)
            else:
                self.error = "the breakpoint's int3 never appeared"
                return
            # Whether the removal took the int3 out is the stub's notice to tell (reading it back
            # here would race with the stub putting it back).
            self.add_and_remove_uprobe(address_file_offset(self.path, self.link_vaddr))
            deadline = time.time() + 60
            while time.time() < deadline and self.byte_at(pid, base + self.link_vaddr) != 0xcc:
                time.sleep(0.01)
            Path(self.go_file).touch()
            self.done = True
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.error = f"{type(e).__name__}: {e}"

    def tracee_pid(self):
        deadline = time.time() + 30
        while time.time() < deadline:
            m = re.search(r"created; pid = (\d+)", self.server.log())
            if m:
                return int(m.group(1))
            time.sleep(0.02)
        raise RuntimeError("the server never said which process it created")

    @staticmethod
    def byte_at(pid, address):
        with open(f"/proc/{pid}/mem", "rb") as mem:
            mem.seek(address)
            return mem.read(1)[0]

    def add_and_remove_uprobe(self, offset):
        append_line(TRACEFS / "uprobe_events", f"p:{self.event} {self.path}:{offset:#x}")
        try:
            (TRACEFS / "events/uprobes" / self.event / "enable").write_text("1\n")
            time.sleep(0.1)
            (TRACEFS / "events/uprobes" / self.event / "enable").write_text("0\n")
        finally:
            append_line(TRACEFS / "uprobe_events", f"-:{self.event}")


class BreakpointTakenOut(GdbTestCase):
    def test_breakpoint_put_back_after_another_programs_uprobe(self):
        self.assertTrue(mount_tracefs(), "tracefs is not mounted at /sys/kernel/tracing and cannot be")
        prog = program("late_call")
        # Where gdb puts the breakpoint (after the prologue), as a link-time address.
        probe = subprocess.run([GDB, "-batch", "-nx", "-ex", "break late_target", prog],
                               capture_output=True, text=True, timeout=60)
        m = re.search(r"Breakpoint 1 at (0x[0-9a-f]+)", probe.stdout)
        self.assertIsNotNone(m, probe.stdout + probe.stderr)
        go_file = Path(tempfile.mkdtemp(prefix="gdbtest-clash-")) / "go"
        try:
            with Server("once", program=prog, args=(go_file,), once=False) as srv:
                clash = UprobeClash(srv, prog, int(m.group(1), 16), go_file)
                clash.start()
                run = run_gdb(["break late_target", "continue", "bt 1", "kill"], program="late_call",
                              server=srv, timeout=120)
                clash.join(30)
        finally:
            shutil.rmtree(go_file.parent, ignore_errors=True)
        details = run.transcript()
        self.assertTrue(clash.done, f"{clash.error}\n{details}")
        self.assertIsNone(clash.error, details)
        # gdb prints the console notice on stderr, the stop on stdout.
        self.assertOutput(run, r"the breakpoint at 0x[0-9a-f]+ in process \d+ was taken out by the "
                               r"kernel .*put back")
        self.assertRegex(run.stdout, r"Breakpoint 1, late_target \(a=0\)", details)


if __name__ == "__main__":
    unittest.main()
