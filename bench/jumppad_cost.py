#!/usr/bin/env python3
"""Per-hit cost of the jump pad vs the eBPF collector on the same `ftrace` site, in one run.

tests/programs/bench_jumppad (PIE, -O2) calls jp_probe CALLS times and prints its own ns per call;
jp_probe's first instruction is a 7-byte rip-relative load. Each round runs it untraced, then
under gdbtrace-server with `ftrace *jp_probe` + `collect $rdi` + `teval $hits = $hits + 1` on the
jump pad, then the same on eBPF (`monitor gdbtrace backend ebpf`), interleaved so load drifts hit
all three alike. Per-hit cost = traced ns/call - untraced ns/call of the same round. CALLS stays
under one pad ring (16384 records per CPU) so no hit is a cheaper drop.

Usage: bench/jumppad_cost.py [BUILD_DIR] [ROUNDS] [CALLS]
(run under flock /tmp/gdbtrace-live.lock: it uses uprobes)."""

import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

build = Path(sys.argv[1] if len(sys.argv) > 1 else "build")
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 7
calls = int(sys.argv[3]) if len(sys.argv) > 3 else 12000
server = build / "gdbserver-agent/src/server/gdbtrace-server"
prog = build / "tests/programs/bench_jumppad"
NS = re.compile(r"ns_per_call=([\d.]+)")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def traced(backend):
    port = free_port()
    log = tempfile.NamedTemporaryFile(prefix="jp-bench-", suffix=".log")
    srv = subprocess.Popen([str(server), "--once", f":{port}", str(prog), str(calls)],
                           stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(500):
            if b"Listening on port" in Path(log.name).read_bytes():
                break
            time.sleep(0.01)
        cmds = ["set pagination off", f"target extended-remote :{port}",
                f"monitor gdbtrace backend {backend}", "break jp_done", "tvariable $hits = 0",
                "ftrace *jp_probe", "actions", "collect $rdi", "teval $hits = $hits + 1", "end",
                "tstart", "continue", "monitor gdbtrace status", "tstop", "tstatus", "kill"]
        args = ["gdb", "-batch", "-nx", str(prog)]
        for c in cmds:
            args += ["-ex", c]
        out = subprocess.run(args, capture_output=True, text=True, timeout=120)
        srv.wait(timeout=10)
        text = out.stdout + out.stderr
        got = re.findall(r"^tracepoint \d+ at .*: backend (\w+)", text, re.M)
        frames = re.search(r"Collected (\d+) trace frames", text)
        if got[:1] != [backend] or not frames or int(frames.group(1)) != calls:
            sys.exit(f"{backend}: not served as expected:\n{text}")
        return float(NS.search(Path(log.name).read_text()).group(1))
    finally:
        if srv.poll() is None:
            srv.kill()


def untraced():
    out = subprocess.run([str(prog), str(calls)], capture_output=True, text=True, check=True)
    return float(NS.search(out.stdout).group(1))


cost = {"jumppad": [], "ebpf": []}
for r in range(rounds):
    base = untraced()
    for backend in cost:
        cost[backend].append(traced(backend) - base)
    print(f"round {r}: untraced {base:.1f} ns/call, jumppad +{cost['jumppad'][-1]:.1f}, "
          f"ebpf +{cost['ebpf'][-1]:.1f}", flush=True)
for backend, v in cost.items():
    print(f"{backend}: per-hit cost median {statistics.median(v):.1f} ns, worst {max(v):.1f} ns "
          f"({rounds} rounds of {calls} hits)")
