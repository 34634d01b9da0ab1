"""Seed corpora for tests/fuzz from real gdb sessions: runs stock gdb 13 against gdbtrace-server with
`set debug remote 1` through a debugging session and a tracing session (the same harness as the
integration tests), collects every packet gdb sent, and writes them as seeds:
  corpus/rsp_codec/<hash>   the packet as framed on the wire ($payload#cs), with a leading chunk byte
  corpus/server_packets/<hash>          the payload alone (what the server's packet handlers see)
  corpus/server_packets/session-<n>     a whole session's payloads in order, one per line
  corpus/trace_requests/<hash>          a tracepoint packet's arguments after its parser's selector byte
Run it from a built tree: python3 tests/fuzz/make_corpus.py  (GDBTRACE_SERVER etc. as for gdbtest)."""

import hashlib
import os
import re
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


def main():
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
    print(f"{len(packets)} distinct packets -> tests/fuzz/corpus/{{rsp_codec,server_packets,trace_requests}}")


if __name__ == "__main__":
    main()
