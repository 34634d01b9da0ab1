"""Seed corpora for tests/fuzz from real gdb sessions: runs stock gdb 13 against gdbtrace-server with
`set debug remote 1` through a debugging session and a tracing session (the same harness as the
integration tests), collects every packet gdb sent, and writes them as seeds:
  corpus/rsp_codec/<hash>   the packet as framed on the wire ($payload#cs), with a leading chunk byte
  corpus/server_packets/<hash>          the payload alone (what the server's packet handlers see)
  corpus/server_packets/session-<n>     a whole session's payloads in order, one per line
  corpus/trace_requests/<hash>          a tracepoint packet's arguments after its parser's selector byte
  corpus/trace_frames/<name>            frames in the tfile layout and the packets that read them back
Run it from a built tree: python3 tests/fuzz/make_corpus.py  (GDBTRACE_SERVER etc. as for gdbtest)."""

import hashlib
import os
import re
import struct
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "integration"))
from gdbtest import run_gdb  # noqa: E402

# fuzz_trace_requests.cc's selector byte for each packet name.
TRACE_PARSERS = {"QTDP:-": 1, "QTDP:": 0, "QTDPsrc:": 3, "QTDV:": 4, "QTro": 5, "QTEnable:": 6,
                 "QTFrame:": 7, "QTDisconnected:": 8, "QTBuffer:size:": 9, "QTNotes:": 10,
                 "QTSave:": 11, "qTV:": 12, "qTBuffer:": 13}

SESSIONS = [
    (["break probe_me", "run", "bt", "info registers", "x/16xb $sp", "print global_array",
      "watch global_counter", "continue", "delete", "info threads", "next", "step", "finish",
      "print $_siginfo", "info sharedlibrary", "kill"], "multi"),
    (["tvariable $n = 0", "break done", "trace probe_me if i > 2", "actions", "collect $regs, i, j",
      "collect global_array[1]@3, *global_ptr", "teval $n = $n + 1", "end", "trace step_me",
      "actions", "while-stepping 2", "collect $pc", "end", "end", "tstart", "continue", "tstatus",
      "tstop", "tfind start", "tdump", "tfind pc step_me", "tfind tracepoint 1", "tfind end",
      "tsave /tmp/gdbtrace-corpus.tf", "info tvariables", "monitor gdbtrace status"], "once"),
]


def record(kind, body: bytes) -> bytes:
    return bytes([kind]) + struct.pack("<H", len(body)) + body


def frame(tp, blocks: bytes) -> bytes:
    return struct.pack("<HI", tp, len(blocks)) + blocks


def trace_frames_seeds():
    """fuzz_trace_frames.cc input: frames as collectors write them (tfile layout: u16 tracepoint,
    u32 size, then 'R' register block / 'M' u64 addr u16 len bytes / 'V' u32 tsv i64 value),
    then the packets that read them back."""
    regs = b"R" + bytes(range(256)) * 3 + bytes(816 - 768)
    mem = b"M" + struct.pack("<QH", 0x401008, 8) + bytes(range(8))
    tsv = b"V" + struct.pack("<Iq", 1, -5)
    frames = [record(0, frame(1, regs + mem)), record(0, frame(2, tsv + mem)), record(0, frame(1, regs))]
    reads = [b"qTStatus", b"QTFrame:0", b"QTFrame:pc:401000", b"QTFrame:tdp:2", b"QTFrame:1",
             b"QTFrame:range:401000:401020", b"QTFrame:outside:401000:401001", b"qGdbtrace.frames:0,1000",
             b"qTBuffer:0,100", b"QTSave:" + b"/dev/null".hex().encode(), b"QTFrame:ffffffff"]
    yield "frames-and-reads", b"".join(frames) + b"".join(record(17, r) for r in reads)
    yield "frames-only", b"".join(frames)
    yield "truncated-frame", record(0, frame(1, regs)[:300]) + record(1, b"qTStatus") + record(1, b"QTFrame:0")


def main():
    (HERE / "corpus/trace_frames").mkdir(parents=True, exist_ok=True)
    for name, data in trace_frames_seeds():
        (HERE / "corpus/trace_frames" / name).write_bytes(data)
    packets = set()
    for name in ("rsp_codec", "server_packets", "trace_requests"):
        (HERE / "corpus" / name).mkdir(parents=True, exist_ok=True)
    for n, (commands, mode) in enumerate(SESSIONS):
        run = run_gdb(["set debug remote 1"] + commands, program="trace_loop", args=(6, 2), mode=mode)
        sent = re.findall(r"Sending packet: (\$.*#[0-9a-f]{2})", run.output)
        packets.update(sent)
        session = "\n".join(raw[1:-3] for raw in sent if "\n" not in raw)
        (HERE / "corpus/server_packets" / f"session-{n}").write_text(session)
    for raw in sorted(packets):
        digest = hashlib.sha1(raw.encode()).hexdigest()[:16]
        (HERE / "corpus/rsp_codec" / digest).write_bytes(b"\x07" + raw.encode())
        payload = raw[1:-3]
        (HERE / "corpus/server_packets" / digest).write_bytes(payload.encode())
        for name in sorted(TRACE_PARSERS, key=len, reverse=True):
            if payload.startswith(name):
                (HERE / "corpus/trace_requests" / digest).write_bytes(
                    bytes([TRACE_PARSERS[name]]) + payload[len(name):].encode())
                break
    print(f"{len(packets)} distinct packets -> tests/fuzz/corpus/{{rsp_codec,server_packets,trace_requests}}, 3 trace_frames seeds")


if __name__ == "__main__":
    main()
