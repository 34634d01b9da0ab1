"""`monitor gdbtrace stream FILE`: a run's frames go to a tfile as they are drained.

The default 5 MB trace buffer holds some 20 000 compact `collect $regs` frames (a linear buffer then
stops the run: "buffer was full"). Streaming, the run goes on: the file gets every frame, the buffer
keeps the newest for tfind, and a new gdb reads the whole run with `target tfile FILE`. The file's
status line counts the run's hits and drops (fields gdb skips), so hits = frames + drops + hits after
the stop can be checked from the file alone.

Tracee: tests/programs/trace_loop.c (probe_me(i, 3*i) for i < N, then done())."""
import mmap
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
    """Frames of the tfile PATH: [(tracepoint, frame bytes)], whether it was ended (the end marker
    last, the status of an ended run), and its status line."""
    with open(path, "rb") as f:
        data = f.read()
    header_end = data.index(b"\n\n") + 2
    status = re.search(rb"^status (.*)$", data[:header_end], re.M).group(1).decode()
    frames, pos, ended = [], header_end, False
    while pos + 2 <= len(data):
        tp = int.from_bytes(data[pos:pos + 2], "little")
        if tp == 0:  # the end marker, or the zeros a flush pads its last block with
            ended = pos + 4 == len(data) and not status.startswith("1")
            break
        size = int.from_bytes(data[pos + 2:pos + 6], "little")
        frames.append((tp, data[pos:pos + 6 + size]))
        pos += 6 + size
    return frames, ended, status


def takes_direct_writes(directory):
    """Whether a file in DIRECTORY takes an O_DIRECT write of one aligned 4 KB block (the stub
    then streams its frames that way: docs/streaming.md)."""
    path = os.path.join(directory, "direct-probe")
    block = mmap.mmap(-1, 4096)  # page-aligned memory
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644)
    except OSError:
        return False
    try:
        return os.pwritev(fd, [block], 0) == 4096
    except OSError:
        return False
    finally:
        os.close(fd)
        os.unlink(path)


def is_drop_marker(frame):
    """A loss marker (docs/streaming.md): one 'V' block of the variable 0x7fffffff."""
    return len(frame) == 19 and frame[6:11] == b"V\xff\xff\xff\x7f"


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
        # Frames go to the disk directly where the file system takes O_DIRECT writes.
        direct = r", written directly \(O_DIRECT\)"
        if takes_direct_writes(self.tmp.name):
            self.assertOutput(live, rf"stream: {re.escape(self.path)}, last run: \d+ frames, \d+ bytes{direct}")
        else:
            self.assertNoOutput(live, direct)
        kept = re.search(r"Buffer contains (\d+) trace frames \(of (\d+) created", live.output)
        self.assertIsNotNone(kept, live.transcript())
        self.assertLess(int(kept.group(1)), HITS, live.transcript())  # the buffer keeps the newest
        self.assertOutput(live, r"Trace is running on the target")  # not stopped when full

        frames, ended, status = tfile_frames(self.path)
        self.assertTrue(ended, "no end marker after tstop\n" + live.transcript())
        hits, drops = status_field(status, "gdbtrace_hits"), status_field(status, "gdbtrace_drops")
        after = status_field(status, "gdbtrace_after_stop")
        # Drops (full kernel rings, under load) leave loss markers: frames of no hit.
        markers = [f for _tp, f in frames if is_drop_marker(f)]
        self.assertEqual(status_field(status, "gdbtrace_drop_markers"), len(markers), status)
        self.assertEqual(sum(int.from_bytes(f[11:19], "little") for f in markers), drops, status)
        created = len(frames) - len(markers)
        self.assertEqual(hits, HITS, status)
        self.assertEqual(created + drops + after, hits, status)
        self.assertEqual(status_field(status, "tframes"), len(frames), status)
        if backend == "ptrace":  # a trap per hit loses nothing
            self.assertEqual(len(frames), HITS)
        last = max(i for i, (_tp, f) in enumerate(frames) if not is_drop_marker(f))

        read = run_gdb([f"target tfile {self.path}", "tstatus", "tfind 0", "print $rdi",
                        f"tfind {last}", "print $rdi", "info tracepoints",
                        "print $xmm0.uint128", "print/x $rip"],
                       program="trace_loop", connect=False, mode="stdio", timeout=300)
        if markers:
            self.assertOutput(read, rf"Buffer contains {len(frames)} trace frames \(of {created} created")
        else:
            self.assertOutput(read, rf"Collected {len(frames)} trace frames")
        self.assertOrdered(read, [r"Found trace frame 0", r"^\$1 = 0$",
                                  rf"Found trace frame {last}", r"^\$2 = \d+$",
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

    def test_tracepoint_defined_during_the_run_is_in_the_header(self):
        # gdb downloads a tracepoint defined while the trace runs at once (InstallInTrace): the
        # stub writes it into the file's header (room kept there) before any frame of it, so gdb
        # reading the file knows every frame's tracepoint.
        live = run_gdb([f"monitor gdbtrace stream {self.path}", "trace probe_me", "actions",
                        "collect $rdi", "end", "break step_me", "tstart", "continue", "delete 2",
                        "trace done", "break exit", "continue", "tstop", "info tracepoints"],
                       program="trace_loop", args=(200,), timeout=120)
        self.assertOutput(live, r"Tracepoint 3 at 0x[0-9a-f]+: file .*trace_loop.c")
        self.assertOutput(live, r"installed on target")
        frames, ended, status = tfile_frames(self.path)
        self.assertTrue(ended, live.transcript())
        with open(self.path, "rb") as f:
            header = f.read().split(b"\n\n", 1)[0].decode(errors="replace")
        self.assertRegex(header, r"(?m)^tp T3:[0-9a-f]+:E:", live.transcript())
        self.assertEqual([tp for tp, _f in frames].count(3), 1, live.transcript())
        self.assertEqual(frames[-1][0], 3, live.transcript())  # done() comes after every probe_me
        self.assertEqual(len(frames), 201, live.transcript())
        read = run_gdb([f"target tfile {self.path}", "tstatus", "info tracepoints", "tfind 200"],
                       program="trace_loop", connect=False, mode="stdio", timeout=120)
        self.assertNoOutput(read, r"Ignoring trace file definition")
        self.assertOutput(read, r"Collected 201 trace frames")
        created = re.search(r"Created tracepoint (\d+) for target's tracepoint 3 at", read.output)
        self.assertIsNotNone(created, read.transcript())
        self.assertOutput(read, r"in done at .*trace_loop.c")
        self.assertOutput(read, rf"Found trace frame 200, tracepoint {created.group(1)}$")

    def test_plugin_exports_a_stream_with_loss_markers(self):
        # A run's stream, and a loss marker spliced in after frame 9 as the stub writes one when a
        # ring was full (its header defines $gdbtrace_dropped in every stream): gdb's tfind stops on
        # it, the plugin's exports skip it, say how many frames were lost, and keep gdb's numbering.
        # (Values are not checked: gdb does not relocate a PIE program under `target tfile`, so the
        # plugin cannot match the file's tracepoint addresses to gdb's.)
        run_gdb(["break done", f"monitor gdbtrace stream {self.path}", "trace probe_me", "actions",
                 "collect $rdi", "end", "tstart", "continue", "tstop"],
                program="trace_loop", args=(50,), timeout=120)
        frames, ended, status = tfile_frames(self.path)
        self.assertTrue(ended, status)
        self.assertEqual(len(frames), 50)
        with open(self.path, "rb") as f:
            data = f.read()
        header_end = data.index(b"\n\n") + 2
        self.assertIn(b"\ntsv 7fffffff:0:0:%s\n" % b"gdbtrace_dropped".hex().encode(), data[:header_end])
        tp = frames[0][0]
        marker = tp.to_bytes(2, "little") + (13).to_bytes(4, "little") + b"V\xff\xff\xff\x7f" + (4).to_bytes(8, "little")
        at = header_end + sum(len(f) for _tp, f in frames[:10])
        spliced = os.path.join(self.tmp.name, "marked.tf")
        with open(spliced, "wb") as f:
            f.write(data[:at] + marker + data[at:])
        out = os.path.join(self.tmp.name, "marked.jsonl")
        plugin = os.path.join(os.path.dirname(__file__), "..", "..", "gdb-plugin", "gdbtrace.py")
        read = run_gdb([f"source {plugin}", f"target tfile {spliced}", "tfind 10",
                        "print $gdbtrace_dropped", "tfind 11", "print $rdi", "tfind none",
                        f"gdbtrace export jsonl {out}"], program="trace_loop", connect=False, mode="stdio", timeout=120)
        self.assertOrdered(read, [r"Found trace frame 10", r"^\$1 = 4$", r"Found trace frame 11", r"^\$2 = 10$",
                                  r"Exported 50 frames",
                                  r"the trace lost 4 frames \(full kernel rings\) at 1 places, first after frame 9"])
        import json
        with open(out) as f:
            lines = [json.loads(line) for line in f]
        self.assertEqual(len(lines), 51)
        self.assertEqual(lines[10], {"frame": 10, "tracepoint": lines[0]["tracepoint"], "dropped": 4})
        self.assertEqual([l["frame"] for l in lines], list(range(51)))

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
