"""`monitor gdbtrace stream FILE`: a run's frames go to a tfile as they are drained.

The default 5 MB trace buffer holds some 20 000 compact `collect $regs` frames (a linear buffer then
stops the run: "buffer was full"). Streaming, the run goes on: the file gets every frame, the buffer
keeps the newest for tfind, and a new gdb reads the whole run with `target tfile FILE`. The file's
status line counts the run's hits and drops (fields gdb skips), so hits = frames + drops + hits after
the stop can be checked from the file alone.

Tracee: tests/programs/trace_loop.c (probe_me(i, 3*i) for i < N, then done())."""
import os
import re
import signal
import subprocess
import tempfile
import time
import unittest

from gdbtest import (GdbTestCase, Server, auto_backend, descendants, gdb_base_command,
                     kill_new_processes, program, run_gdb)

HITS = 60000


def tfile_frames(path):
    """Frames of the tfile PATH: [(tracepoint, frame bytes)], whether it has its end marker, and
    its status line."""
    with open(path, "rb") as f:
        data = f.read()
    header_end = data.index(b"\n\n") + 2
    status = re.search(rb"^status (.*)$", data[:header_end], re.M).group(1).decode()
    frames, pos, ended = [], header_end, False
    while pos + 2 <= len(data):
        tp = int.from_bytes(data[pos:pos + 2], "little")
        if tp == 0:
            ended = True
            break
        size = int.from_bytes(data[pos + 2:pos + 6], "little")
        frames.append((tp, data[pos:pos + 6 + size]))
        pos += 6 + size
    return frames, ended, status


def status_field(status, name):
    found = re.search(rf"(?:^|;){name}:([0-9a-f]+)", status)
    return int(found.group(1), 16) if found else None


class Stream(GdbTestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="gdbtrace-stream-")
        self.path = os.path.join(self.tmp.name, "run.tf")

    def tearDown(self):
        self.tmp.cleanup()

    def test_run_outlives_the_buffer_and_the_file_holds_every_frame(self):
        backend = auto_backend()
        live = run_gdb(["break done", f"monitor gdbtrace stream {self.path}", "trace probe_me",
                        "actions", "collect $regs", "end", "tstart", "continue", "tstatus",
                        "monitor gdbtrace status", "tstop", "monitor gdbtrace stream",
                        "tfind 0", "print $rdi"],
                       program="trace_loop", args=(HITS,), timeout=300)
        self.assertNoOutput(live, r"buffer was full")
        self.assertOutput(live, rf"stream: {re.escape(self.path)}, writing: \d+ frames")
        self.assertOutput(live, rf"stream: {re.escape(self.path)}, last run: \d+ frames")
        kept = re.search(r"Buffer contains (\d+) trace frames \(of (\d+) created", live.output)
        self.assertIsNotNone(kept, live.transcript())
        self.assertLess(int(kept.group(1)), HITS, live.transcript())  # the buffer keeps the newest
        self.assertOutput(live, r"Trace is running on the target")  # not stopped when full

        frames, ended, status = tfile_frames(self.path)
        self.assertTrue(ended, "no end marker after tstop\n" + live.transcript())
        hits, drops = status_field(status, "gdbtrace_hits"), status_field(status, "gdbtrace_drops")
        after = status_field(status, "gdbtrace_after_stop")
        self.assertEqual(hits, HITS, status)
        self.assertEqual(len(frames) + drops + after, hits, status)
        self.assertEqual(status_field(status, "tframes"), len(frames), status)
        if backend == "ptrace":  # a trap per hit loses nothing
            self.assertEqual(len(frames), HITS)

        read = run_gdb([f"target tfile {self.path}", "tstatus", "tfind 0", "print $rdi",
                        f"tfind {len(frames) - 1}", "print $rdi", "info tracepoints",
                        "print $xmm0.uint128", "print/x $rip"],
                       program="trace_loop", connect=False, mode="stdio", timeout=300)
        self.assertOutput(read, rf"Collected {len(frames)} trace frames")
        self.assertOrdered(read, [r"Found trace frame 0", r"^\$1 = 0$",
                                  rf"Found trace frame {len(frames) - 1}", r"^\$2 = \d+$",
                                  rf"already hit {HITS} times"])
        # A kernel collector's frames lack the x87/SSE/AVX registers: the file's blocks hold only
        # the registers every frame has (as `tsave -r`), and gdb shows the others unavailable.
        if backend != "ptrace":
            self.assertOutput(read, r"^\$3 = <unavailable>$")
            self.assertLess(len(frames[0][1]), 300, "register blocks not cut")
        site = re.search(r"for target's tracepoint \d+ at (0x[0-9a-f]+)", read.output)
        self.assertIsNotNone(site, read.transcript())
        self.assertOutput(read, rf"^\$4 = {site.group(1)}$")
        if drops == 0:  # frame 0 of the buffer is the oldest it kept; the file has them all
            self.assertOutput(read, rf"^\$2 = {HITS - 1}$")
            self.assertOutput(live, rf"^\$1 = {HITS - int(kept.group(1))}$")

    def test_stream_set_during_the_run_takes_the_held_frames_and_ends_cleanly_when_off(self):
        live = run_gdb(["break done", "trace probe_me", "actions", "collect $regs", "end",
                        "tstart", "continue", f"monitor gdbtrace stream {self.path}",
                        "monitor gdbtrace stream off", "tstatus", "monitor gdbtrace status"],
                       program="trace_loop", args=(5000,), timeout=300)
        self.assertOutput(live, r"^stream: off$")
        self.assertOutput(live, r"Trace is running on the target")
        frames, ended, status = tfile_frames(self.path)
        self.assertTrue(ended, live.transcript())
        held = int(re.search(r"Collected (\d+) trace frames", live.output).group(1))
        self.assertEqual(len(frames), held, live.transcript())
        read = run_gdb([f"target tfile {self.path}", "tstatus"], program="trace_loop",
                       connect=False, mode="stdio")
        self.assertOutput(read, rf"Collected {held} trace frames")
        self.assertOutput(read, r"streaming stopped by `monitor gdbtrace stream off`")

    def stub_killed_mid_run(self, sig):
        """Streams tests/programs/loop's tick() (every ~10 ms), sends SIG to the stub once the file
        counts 50 frames, and returns the file's frames, end marker and status."""
        script = os.path.join(self.tmp.name, "run.gdb")
        with open(script, "w") as f:
            f.write(f"monitor gdbtrace stream {self.path}\ntrace tick\nactions\ncollect $regs\nend\n"
                    "tstart\ncontinue\n")
        before = descendants()
        try:
            with Server("once", program=program("loop"), args=("-", 60)) as server:
                gdb = subprocess.Popen(gdb_base_command() + ["-batch", program("loop"), "-ex",
                                                             f"target extended-remote {server.address}",
                                                             "-x", script],
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)
                deadline = time.time() + 30
                while time.time() < deadline:  # the status line is rewritten after every write
                    if os.path.exists(self.path) and os.path.getsize(self.path) > 0:
                        counted = status_field(tfile_frames(self.path)[2], "tframes")
                        if counted and counted >= 50:
                            break
                    time.sleep(0.2)
                os.kill(server.proc.pid, sig)
                server.proc.wait(timeout=30)
                try:
                    gdb.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    gdb.kill()
                    gdb.wait()
        finally:
            kill_new_processes(before)
        return tfile_frames(self.path)

    def test_sigkill_leaves_a_file_gdb_reads_to_its_last_frame(self):
        frames, ended, status = self.stub_killed_mid_run(signal.SIGKILL)
        self.assertFalse(ended)
        counted = status_field(status, "tframes")
        self.assertGreaterEqual(counted, 50, status)
        self.assertLessEqual(counted, len(frames), status)
        read = run_gdb([f"target tfile {self.path}", "tstatus", f"tfind {counted - 1}",
                        "print/x $pc"], program="loop", connect=False, mode="stdio")
        self.assertOutput(read, rf"Collected {counted} trace frames")
        self.assertOutput(read, r"the run had not ended when gdbtrace-server last wrote")
        self.assertOutput(read, rf"Found trace frame {counted - 1}, tracepoint 1")
        self.assertOutput(read, r"^\$1 = 0x[0-9a-f]+$")

    def test_sigterm_ends_the_file(self):
        frames, ended, status = self.stub_killed_mid_run(signal.SIGTERM)
        self.assertTrue(ended, status)
        self.assertEqual(status_field(status, "tframes"), len(frames), status)
        read = run_gdb([f"target tfile {self.path}", "tstatus", f"tfind {len(frames) - 1}"],
                       program="loop", connect=False, mode="stdio")
        self.assertOutput(read, rf"Collected {len(frames)} trace frames")
        self.assertNoOutput(read, r"had not ended")
        self.assertOutput(read, rf"Found trace frame {len(frames) - 1}, tracepoint 1")


if __name__ == "__main__":
    unittest.main()
