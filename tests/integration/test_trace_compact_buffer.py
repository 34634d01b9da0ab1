"""The trace buffer stores kernel collectors' frames compactly and every reader sees tfile frames.

An eBPF frame holds the registers a uprobe can read, not x87/SSE/AVX: the buffer keeps only those
(trace/compact_frame.h), so the default 5 MB buffer holds several times more `collect $rdi` frames
than the ~6 300 of 823 bytes it held when frames were stored whole, and tstatus's free space is the
real storage. Everything that hands frames out expands them to the same tfile bytes: `tfind` with
registers and memory (uncollected registers stay <unavailable>), `tdump`, a plain `tsave` (gdb
reads qTBuffer in 2000-byte chunks until an empty reply), `tsave -r` (the stub writes the file), the
plugin's bulk read (qGdbtrace.frames), and call stacks.

Tracee: tests/programs/trace_loop.c (probe_me(i, 3*i) for i < N, then done())."""
import os
import re
import tempfile
import unittest

from gdbtest import GdbTestCase, available_collectors, program, require, run_gdb

TFILE_REGS_FRAME = 6 + 1 + 816  # a `collect $rdi` frame in tfile layout (AVX register block)
DEFAULT_BUFFER = 5 * 1024 * 1024


def tfile_frames(path):
    """The frames of a tfile as (tracepoint, bytes of the frame from its header), and the R size."""
    with open(path, "rb") as f:
        data = f.read()
    header_end = data.index(b"\n\n") + 2
    regsize = int(re.search(rb"^R ([0-9a-f]+)$", data[:header_end], re.M).group(1), 16)
    frames, pos = [], header_end
    while pos + 6 <= len(data):
        tp = int.from_bytes(data[pos:pos + 2], "little")
        size = int.from_bytes(data[pos + 2:pos + 6], "little")
        if tp == 0:
            break
        frames.append((tp, data[pos:pos + 6 + size]))
        pos += 6 + size
    return frames, regsize


class CompactBuffer(GdbTestCase):
    def setUp(self):
        require(self, "ebpf" in available_collectors(),
                f"no eBPF collector in this server (collectors: {available_collectors()})", key="no-ebpf")
        self.tmp = tempfile.TemporaryDirectory(prefix="gdbtrace-compact-")

    def tearDown(self):
        self.tmp.cleanup()

    def test_default_buffer_holds_three_times_more_register_frames(self):
        run = run_gdb(["break done", "monitor gdbtrace backend ebpf", "trace probe_me", "actions",
                       "collect $rdi", "end", "tstart", "continue", "tstatus", "tfind 0", "print $rdi",
                       "print $xmm0",
                       "python import re; n = int(re.search(r'Collected (\\d+) trace frames', "
                       "gdb.execute('tstatus', to_string=True)).group(1)); gdb.execute('tfind %d' % (n - 1))",
                       "print $rdi"],
                      program="trace_loop", args=(60000,), timeout=120)
        self.assertOutput(run, r"Trace stopped because the buffer was full")
        frames = int(re.search(r"Collected (\d+) trace frames", run.output).group(1))
        old = DEFAULT_BUFFER // TFILE_REGS_FRAME
        self.assertGreaterEqual(frames, 3 * old,
                                f"{frames} frames held, {old} when stored whole\n" + run.transcript())
        # Free space is what the compact frames left: less than one more frame.
        free = int(re.search(r"buffer has (\d+) bytes of (\d+) bytes free", run.output).group(1))
        self.assertLess(free, TFILE_REGS_FRAME, run.transcript())
        # The first frame and the last one read back, with the registers eBPF cannot read unavailable
        # (a full kernel ring may have dropped hits before the buffer filled: the last i is >= its number).
        self.assertOrdered(run, [r"Found trace frame 0", r"^\$1 = 0$", r"^\$2 = <unavailable>$",
                                 rf"Found trace frame {frames - 1}", r"^\$3 = \d+$"])
        last = int(re.findall(r"^\$3 = (\d+)$", run.output, re.M)[-1])
        self.assertTrue(frames - 1 <= last < 60000, run.transcript())

    def test_every_reader_sees_the_same_frames(self):
        plain, raw = os.path.join(self.tmp.name, "plain.tf"), os.path.join(self.tmp.name, "raw.tf")
        # The plugin's two bulk reads: a file the stub writes (qGdbtrace.frames.file) and
        # qGdbtrace.frames packets (3000 bytes each here, so chunks end inside frames).
        stream = os.path.join(self.tmp.name, "stream.bin")
        packets = os.path.join(self.tmp.name, "packets.bin")
        plugin = os.path.join(os.path.dirname(__file__), "../../gdb-plugin/gdbtrace.py")
        live = run_gdb([f"source {plugin}", "break done", "monitor gdbtrace backend ebpf",
                        "monitor gdbtrace stacks on 512", "trace probe_me", "actions",
                        "collect $rdi, global_point", "end", "tstart", "continue", "tstop",
                        "monitor gdbtrace status", "tstatus", "tfind 7", "print $rdi", "print $rsi",
                        "print global_point.name", "print $xmm0", "tdump",
                        "tfind none", f"tsave {plain}", f"tsave -r {raw}",
                        "python from gdbtrace_plugin import session",
                        "python s = session.current_stub()",
                        f"python open('{stream}', 'wb').write(b''.join(c for _, c in s.iter_stream(0)))",
                        f"python open('{packets}', 'wb').write(b''.join(c for _, c in s.iter_stream(0, 3000)))",
                        "gdbtrace stacks -top 1"],
                       program="trace_loop", args=(40,), timeout=120)
        self.assertOutput(live, r"backend ebpf, hits 40, frames 40")
        self.assertOrdered(live, [r"Found trace frame 7", r"^\$1 = 7$", r"^\$2 = 21$",
                                  r'^\$3 = "origin', r"^\$4 = <unavailable>$",
                                  r"^\$rdi = 7$", r"^global_point = \{x = 7, y = 8"])
        # Every frame: 40 frames of the stacks run in the call-stack summary.
        self.assertOutput(live, r"^\s+40\s+100(\.0)?%\s+probe_me <- main")

        # The plugin's bulk read and gdb's qTBuffer walk get the same tfile frames, with 'R' blocks
        # of the whole register block (gdb's own header for plain tsave says 816 or 560 bytes).
        frames, regsize = tfile_frames(plain)
        self.assertEqual(len(frames), 40, live.transcript())
        self.assertIn(regsize, (560, 816))
        for path in (stream, packets):
            with open(path, "rb") as f:
                self.assertEqual(f.read(), b"".join(fr for _, fr in frames), path + live.transcript())
        for n, (_, fr) in enumerate(frames):
            self.assertEqual(fr[6:7], b"R")
            rdi = int.from_bytes(fr[7 + 5 * 8:7 + 6 * 8], "little")
            self.assertEqual(rdi, n)

        # Both files read back through target tfile with the live frames' registers.
        for path in (plain, raw):
            back = run_gdb([f"file {program('trace_loop')}", f"target tfile {path}", "tfind 7",
                            "print $rdi", "print $rsi", "tfind 39", "print $rdi"], connect=False)
            self.assertOrdered(back, [r"Found trace frame 7", r"^\$1 = 7$", r"^\$2 = 21$",
                                      r"Found trace frame 39", r"^\$3 = 39$"])


if __name__ == "__main__":
    unittest.main()
