"""Seed corpora for tests/fuzz from real gdb sessions: runs stock gdb 13 against gdbtrace-server with
`set debug remote 1` through a debugging session and a tracing session (the same harness as the
integration tests), collects every packet gdb sent, and writes them as seeds:
  corpus/rsp_codec/<hash>   the packet as framed on the wire ($payload#cs), with a leading chunk byte
  corpus/packets/<hash>     the payload alone (what the server's packet handlers see)
Run it from a built tree: python3 tests/fuzz/make_corpus.py  (GDBTRACE_SERVER etc. as for gdbtest)."""

import hashlib
import os
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "integration"))
from gdbtest import run_gdb  # noqa: E402

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
    for commands, mode in SESSIONS:
        run = run_gdb(["set debug remote 1"] + commands, program="trace_loop", args=(6, 2), mode=mode)
        for raw in re.findall(r"Sending packet: (\$.*#[0-9a-f]{2})", run.output):
            packets.add(raw)
    for name in ("rsp_codec", "packets"):
        (HERE / "corpus" / name).mkdir(parents=True, exist_ok=True)
    for raw in sorted(packets):
        digest = hashlib.sha1(raw.encode()).hexdigest()[:16]
        (HERE / "corpus/rsp_codec" / digest).write_bytes(b"\x07" + raw.encode())
        (HERE / "corpus/packets" / digest).write_bytes(raw[1:-3].encode())
    print(f"{len(packets)} distinct packets -> tests/fuzz/corpus/{{rsp_codec,packets}}")


if __name__ == "__main__":
    main()
