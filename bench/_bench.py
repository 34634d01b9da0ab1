"""Helpers for the Python bench row scripts (bench/workloads.sh, threads.sh, dataout.sh).

Same conventions as bench/_lib.sh (see bench/README.md): rows go to stdout as JSON lines, which
bench/run.sh collects; everything else is log. Environment: BENCH_SMOKE, BENCH_BUILD, BENCH_PROGRAMS,
GDBTRACE_SERVER.
"""
import atexit
import functools
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "gdb-plugin"))
from gdbtrace_plugin import frames as tframes  # noqa: E402  (the plugin's frame parser, no gdb needed)
from gdbtrace_plugin.transport import StubError, TfileSource  # noqa: E402
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
import gdbtest  # noqa: E402  (the one harness that starts stubs, shared with the integration tests)
BUILD = os.environ.get("BENCH_BUILD") or os.environ.get("BUILD_DIR") or os.path.join(REPO, "build")
PROGRAMS = os.environ.get("BENCH_PROGRAMS") or os.path.join(BUILD, "tests/programs")
SERVER = os.environ.get("GDBTRACE_SERVER") or os.path.join(
    BUILD, "gdbserver-agent/src/server/gdbtrace-server")
SMOKE = os.environ.get("BENCH_SMOKE", "0") == "1"
GDB = os.environ.get("BENCH_GDB", "/usr/bin/gdb")
GDBSERVER = "/usr/bin/gdbserver"
IPA = "/usr/lib/libinproctrace.so"
WORK = tempfile.mkdtemp(prefix="gdbtrace-bench-py.")
if os.environ.get("BENCH_KEEP") != "1":  # BENCH_KEEP=1 keeps the gdb logs and tsave files
    atexit.register(shutil.rmtree, WORK, True)


def n(full, smoke):
    return smoke if SMOKE else full


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def row(mechanism, workload, ns_per_hit, emit=True, **notes):
    """One bench row (bench/README.md). ns_per_hit None -> NA (give reason=...). emit=False: built,
    not printed (one round of interleaved runs, printed later)."""
    r = {"mechanism": mechanism, "workload": workload,
         "ns_per_hit": None if ns_per_hit is None else round(float(ns_per_hit), 1)}
    r.update({k: v for k, v in notes.items() if v is not None})
    if emit:
        print(json.dumps(r), flush=True)
    return r


MISSED = []  # texts of the targets judge() found missed


def judge(ok, text):
    """A target the script judges itself, printed as a row with judged=PASS|MISS (bench/_report.py
    lists those among its targets). A MISS makes exit_code() 3: the row scripts' convention (3 = a
    target missed, bench/run.sh --allow-miss accepts it; other non-zero = the script is broken)."""
    if not ok:
        MISSED.append(text)
    script = os.path.basename(sys.argv[0]).lstrip("_").removesuffix(".py")
    row("target", script, None, judged="PASS" if ok else "MISS", text=text)


BROKEN = []  # what broke a measurement itself (a hung session): the script exits 1, not 3


def broken(text):
    """Something that is neither a result nor a miss (a session that hung): logged, and the script
    ends with exit 1 after its rows, so bench/run.sh reports it as broken even with --allow-miss."""
    BROKEN.append(text)
    log("BROKEN: " + text)


def exit_code():
    return 1 if BROKEN else 3 if MISSED else 0


def process_states(pid, label):
    """Every thread of PID: state, wchan and kernel stack (root reads it), for a log of a hang."""
    lines = [f"--- {label} (pid {pid}) ---"]
    try:
        tids = sorted(os.listdir(f"/proc/{pid}/task"), key=int)
    except OSError as e:
        return lines[0] + f" gone: {e}\n"
    for tid in tids:
        base = f"/proc/{pid}/task/{tid}"
        try:
            stat = open(f"{base}/stat").read()
            name, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
            wchan = open(f"{base}/wchan").read().strip() or "-"
            stack = " <- ".join(line.split()[-1] for line in open(f"{base}/stack").read().splitlines()[:8])
        except (OSError, ValueError, IndexError) as e:
            lines.append(f"thread {tid}: unreadable ({e})")
            continue
        lines.append(f"thread {tid} ({name}): state {rest[0]} policy {rest[38]} cpu {rest[36]} "
                     f"wchan {wchan}; stack {stack or '-'}")
    return "\n".join(lines) + "\n"


def program(name):
    path = os.path.join(PROGRAMS, name)
    if not os.access(path, os.X_OK):
        sys.exit(f"missing {path} (build tests/programs first)")
    return path


def phases(text):
    """{site: ns_per_iter} from the tracee's `phase=<site> n=<n> ns_per_iter=<x>` lines."""
    return {m.group(1): float(m.group(2))
            for m in re.finditer(r"phase=(\S+) n=\d+ ns_per_iter=([0-9.]+)", text)}


def untraced(argv, parse=phases, runs=3):
    """Median over `runs` untraced runs of every figure `parse` extracts."""
    results = [parse(subprocess.run(argv, capture_output=True, text=True, timeout=600).stdout)
               for _ in range(runs)]
    return {k: statistics.median(r[k] for r in results if k in r) for k in results[0]}


@functools.lru_cache(maxsize=None)
def _symbols(prog):
    """{symbol: address} of PROG (nm), read once per program."""
    out = {}
    for line in subprocess.run(["nm", prog], capture_output=True, text=True).stdout.splitlines():
        parts = line.split()
        if len(parts) == 3:
            out[parts[2]] = int(parts[0], 16)
    return out


def file_offset(prog, sym):
    """File offset of SYMBOL in PROG (what a tracefs uprobe wants)."""
    addr = _symbols(prog).get(sym)
    return None if addr is None else gdbtest.address_file_offset(prog, addr)


def tracefs():
    for d in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing"):
        if os.path.exists(f"{d}/uprobe_events"):
            return d
    subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"], capture_output=True)
    return "/sys/kernel/tracing" if os.path.exists("/sys/kernel/tracing/uprobe_events") else None


def tracefs_write(path, text):
    """Appends to a tracefs control file (python's open(..., "a") seeks, which tracefs refuses)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


class RawUprobes:
    """Raw tracefs uprobes (no fetch args) on every (prog, symbol) of SITES while the `with` block
    runs; `hits()` reads their counts. `error` names why they could not be placed (None: placed)."""

    group = "gdbtrace_benchpy"

    def __init__(self, sites):
        self.sites, self.events, self.error, self.tf = sites, {}, None, tracefs()

    def __enter__(self):
        if not self.tf:
            self.error = "tracefs_unavailable"
            return self
        try:
            for prog, sym in self.sites:
                off = file_offset(prog, sym)
                if off is None:
                    self.error = f"no_symbol_{sym}"
                    return self
                ev = f"{sym}_{os.getpid()}"
                tracefs_write(f"{self.tf}/uprobe_events", f"p:{self.group}/{ev} {prog}:{off:#x}\n")
                self.events[sym] = ev
                tracefs_write(f"{self.tf}/events/{self.group}/{ev}/enable", "1")
        except OSError as e:
            self.error = "uprobe_events_rejected:" + str(e).replace(" ", "_")
        return self

    def hits(self):
        out = {}
        for line in open(f"{self.tf}/uprobe_profile"):
            parts = line.split()
            for sym, ev in self.events.items():
                if len(parts) >= 3 and parts[1] == ev:
                    out[sym] = int(parts[2])
        return out

    def __exit__(self, *exc):
        for ev in self.events.values():
            try:
                tracefs_write(f"{self.tf}/events/{self.group}/{ev}/enable", "0")
                tracefs_write(f"{self.tf}/uprobe_events", f"-:{self.group}/{ev}\n")
            except OSError:
                pass
        return False


def with_uprobes(sites, argv):
    """Runs argv with raw tracefs uprobes (no fetch args) on every (prog, symbol) of `sites`.
    Returns (tracee stdout, {symbol: hits}) or (None, reason)."""
    with RawUprobes(sites) as probes:
        if probes.error:
            return None, probes.error
        out = subprocess.run(argv, capture_output=True, text=True, timeout=900).stdout
        try:
            return out, probes.hits()
        except OSError as e:
            return None, "uprobe_profile_unreadable:" + str(e).replace(" ", "_")


class Server(gdbtest.Server):
    """gdbtrace-server (KIND "gdbtrace") or stock gdbserver ("gdbserver") `--once` on a TCP port for
    ARGV, started by the test harness's Server (tests/integration/gdbtest.py: its own TMPDIR, port
    retries); WRAPPER: server options before --once (gdbserver's --wrapper ... --). Its output (the
    tracee's stdout) stays readable after stop()."""

    def __init__(self, kind, argv, wrapper=(), env=None):
        self.kind, self._output = kind, None
        super().__init__("once", program=argv[0], args=argv[1:], server_args=list(wrapper), env=env,
                         binary=GDBSERVER if kind == "gdbserver" else SERVER)

    def output(self):
        return self.log() if self._output is None else self._output

    def vm(self, key="VmHWM"):
        """kB of /proc/PID/status KEY, or None."""
        try:
            for line in open(f"/proc/{self.proc.pid}/status"):
                if line.startswith(key + ":"):
                    return int(line.split()[1])
        except OSError:
            return None
        return None

    def stop(self):
        if self._output is None:
            super().stop()
            self._output = self.log()
            self.__exit__()  # removes the log file; its text is kept above


def gdb_session(kind, argv, script_for, log_name, wrapper=(), env=None):
    """One gdb session against a Server for ARGV: gdb runs script_for(server); returns gdb's output
    followed by the server's (with the tracee's), also written to WORK/LOG_NAME."""
    server = Server(kind, argv, wrapper, env)
    try:
        text = gdb(script_for(server))
    finally:
        server.stop()
    text += "\n" + server.output()
    with open(os.path.join(WORK, log_name), "w") as f:
        f.write(text)
    return text


def gdb(script, timeout=900):
    """Runs gdb -batch on the script text; returns its stdout+stderr."""
    path = os.path.join(WORK, f"session-{time.monotonic_ns()}.gdb")
    with open(path, "w") as f:
        f.write(script)
    try:
        # The harness's gdb settings (no pager, no confirmation, no debuginfod, no styling).
        p = subprocess.run([GDB, *gdbtest.gdb_base_command()[1:], "-batch", "-x", path],
                           capture_output=True, text=True, timeout=timeout)
        return p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        return (e.stdout or b"").decode(errors="replace") + "\nTIMEOUT\n"


def frames_collected(text):
    m = re.findall(r"Collected (\d+) trace frames", text)
    return int(m[-1]) if m else None


def stub_status(text):
    """{number: {address, hits, frames, drops, after_stop, errors, backend}} from `monitor gdbtrace status` (last one)."""
    out = {}
    # "after stop N" (hits after tstop) sits between drops and errors since the stub counts them.
    for m in re.finditer(r"tracepoint (\d+) at (0x[0-9a-f]+)[^:]*: backend (\S+), hits (\d+), "
                         r"frames (\d+), drops (\d+), (?:after stop (\d+), )?errors (\d+)", text):
        out[int(m.group(1))] = {"address": m.group(2), "backend": m.group(3), "hits": int(m.group(4)),
                                "frames": int(m.group(5)), "drops": int(m.group(6)),
                                "after_stop": None if m.group(7) is None else int(m.group(7)),
                                "errors": int(m.group(8))}
    return out


def first_error(text):
    for line in text.splitlines():
        if re.search(r"error|refused|cannot|not supported|too far|unable", line, re.I) and \
                "Error in sourced command file" not in line:
            line = re.sub(r"^Target returns error code '\.?", "", line).rstrip("'.")
            return re.sub(r"\s+", "_", line.replace('"', ""))[:100]
    return None


def tfile_frames(path):
    """Frames of a gdb tfile (tsave), read with the plugin's tfile reader and frame parser
    (gdb-plugin/gdbtrace_plugin: TfileSource, frames): a list of frames.Frame (tp, regs, mem), None
    for a frame whose blocks do not parse (gdb could not read it either; callers count it).
    ValueError when PATH is not a tfile."""
    try:
        src = TfileSource(path)
    except StubError as e:
        raise ValueError(str(e)) from e
    splitter, out = tframes.FrameSplitter(), []
    for _off, chunk in src.iter_stream(0):
        for tp, body, _ in splitter.feed(chunk):
            try:
                out.append(tframes.parse_frame(body, len(out), tp, src.regblock_size))
            except tframes.FrameFormatError:
                out.append(None)
    return out


def reg(block, index):
    """GPR `index` (amd64_regs.h numbering: 0 rax, 3 rdx, 4 rsi, 5 rdi, ...) from an R block."""
    return int.from_bytes(block[index * 8:index * 8 + 8], "little")
