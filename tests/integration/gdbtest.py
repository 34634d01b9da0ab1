"""Harness for integration tests: the real /usr/bin/gdb driving a gdbserver-compatible stub.

Environment (ctest sets these; defaults fit a tree built with scripts/build.sh):
  GDBTRACE_SERVER    stub to test (default <repo>/build/gdbserver-agent/src/server/gdbtrace-server);
                     set it to /usr/bin/gdbserver to check a test against stock gdbserver.
  GDBTRACE_PROGRAMS  directory of the built tests/programs (default <repo>/build/tests/programs)
  GDBTRACE_GDB       debugger (default /usr/bin/gdb)
  GDBTRACE_KEEP_LOGS if set, print every transcript, not only failing ones

Main entry points:
  run_gdb(commands, program=None, args=(), server_args=(), timeout=60, extended=True, mode='once', mi=False)
      -> GdbRun(stdout, stderr, returncode, server_log)
    mode 'once'   : SERVER --once :PORT PROGRAM ARGS   (server creates the process; no program -> --multi)
         'multi'  : SERVER --multi :PORT; gdb gets `set remote exec-file PROGRAM` and the commands `run` it
         'stdio'  : no TCP: gdb runs `target extended-remote | SERVER - PROGRAM ARGS`
         'attach' : the harness starts PROGRAM ARGS itself, then SERVER --attach :PORT PID
    server_env: extra environment of a server the harness starts (by default its TMPDIR is a directory
    of its own, removed with it: gdbtrace-server saves a trace there that gdb would lose).
    mi=True: commands are MI commands, run one by one through `gdb -i=mi` (see MiSession); each command
    waits for its ^done/^error, and a ^running one also for the next *stopped.
  Server(...)      a stub started by the test itself (attach/reconnect scenarios); pass it as
                   run_gdb(..., server=srv) or MiSession(server=srv).
  Tracee(...)      a program started by the test itself (to attach to).
  MiSession(...)   drive `gdb -i=mi` through pipes like an IDE does (gdbtest_mi.py, imported from here).
  GdbTestCase      unittest.TestCase with assertions that print the whole transcript on failure.

Every process a run starts (server, gdb, tracees, their forks) is killed when the run ends: this
python process is a child subreaper, so orphaned tracees are re-parented to it and can be found.
"""

import atexit
import functools
import ctypes
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GDB = os.environ.get("GDBTRACE_GDB", "/usr/bin/gdb")


def server_path() -> str:
    return os.environ.get(
        "GDBTRACE_SERVER", str(REPO / "build/gdbserver-agent/src/server/gdbtrace-server"))


def programs_dir() -> Path:
    return Path(os.environ.get("GDBTRACE_PROGRAMS", str(REPO / "build/tests/programs")))


@functools.lru_cache(maxsize=None)
def load_segments(prog: str):
    """[(file offset, vaddr, size)] of PROG's LOAD segments (readelf), read once per program."""
    out = []
    for line in subprocess.run(["readelf", "-lW", prog], capture_output=True,
                               text=True).stdout.splitlines():
        m = re.match(r"\s*LOAD\s+(0x[0-9a-f]+)\s+(0x[0-9a-f]+)\s+\S+\s+(0x[0-9a-f]+)", line)
        if m:
            out.append(tuple(int(x, 16) for x in m.groups()))
    return out


def address_file_offset(prog: str, vaddr: int):
    """File offset of link-time address VADDR in PROG (what a tracefs uprobe wants), or None."""
    for off, seg_vaddr, size in load_segments(prog):
        if seg_vaddr <= vaddr < seg_vaddr + size:
            return vaddr - seg_vaddr + off
    return None


@functools.lru_cache(maxsize=None)
def private_programs_dir() -> Path:
    """This test process's own copy of the built programs. The kernel keys uprobes by file and
    offset and takes any int3 at a uprobe's address for its own: another test process's eBPF
    tracepoint on step_me, say, would eat or take out this process's `break step_me` in the same
    file (test_debug_uprobe_clash shows the stub putting it back, but a hit can still be missed).
    Copies are other files, so tests running side by side cannot meet there. Shared libraries stay
    where they are (the programs' rpath names the build directory)."""
    copy = Path(tempfile.mkdtemp(prefix="gdbtest-programs-"))
    atexit.register(shutil.rmtree, copy, True)
    for entry in programs_dir().iterdir():
        if entry.is_file():
            shutil.copy2(entry, copy / entry.name)
    return copy


def program(name: str) -> str:
    """Absolute path of a built test program (tests/programs/<name>.c), in this process's copy."""
    path = programs_dir() / name
    if not path.exists():
        raise FileNotFoundError(f"test program {path} not built (ninja test_programs)")
    return str(private_programs_dir() / name)


def is_stock_gdbserver() -> bool:
    return os.path.basename(server_path()) == "gdbserver"


def strict() -> bool:
    """Under CI (CI=true) and scripts/test.sh (GDBTRACE_STRICT=1) a collector, tool or kernel feature
    that a test needs but does not find is a failure, not a skip: green must mean tested."""
    return os.environ.get("CI") == "true" or os.environ.get("GDBTRACE_STRICT") == "1"


def skip_allowed(key) -> bool:
    """Whether GDBTRACE_ALLOW_SKIP (comma-separated keys; the README's "Skips allowed in strict mode"
    table says which key fits which machine) lists KEY."""
    return key is not None and key in os.environ.get("GDBTRACE_ALLOW_SKIP", "").split(",")


def skip_fails(reason: str) -> bool:
    """Whether a skip with REASON is a failure: in strict() mode, unless the reason starts with an
    allowed "[key] " (require() writes it) or the server under test is stock gdbserver (that mode
    checks the tests themselves; tests skip what only gdbtrace-server does)."""
    m = re.match(r"\[([\w-]+)\] ", reason or "")
    return strict() and not is_stock_gdbserver() and not skip_allowed(m and m.group(1))


def require(testcase, ok: bool, why: str, key: str = None):
    """Skips TESTCASE unless OK; WHY says what is missing. In strict() mode the skip is a failure
    unless GDBTRACE_ALLOW_SKIP lists KEY (GdbTestCase turns every such skip into a failure; this
    fails directly so that a test not derived from it fails too)."""
    if ok:
        return
    if skip_fails(f"[{key}] " if key else ""):
        testcase.fail("missing under CI=true / GDBTRACE_STRICT=1 (a skip would hide it): " + why)
    testcase.skipTest(f"[{key}] {why}" if key else why)


_collectors = None


@functools.lru_cache(maxsize=None)
def machine_delivers_debug_traps() -> bool:
    """From the independent oracle tests/programs/dr_probe: some hypervisors accept debug-register
    writes and never raise the trap. There hardware breakpoints and watchpoints must be refused
    with the reason (tests then assert that), never accepted and silently never firing."""
    out = subprocess.run([program("dr_probe")], capture_output=True, text=True, timeout=30)
    if out.returncode != 0 or out.stdout.strip() not in ("delivered", "not delivered"):
        raise RuntimeError(f"dr_probe could not tell: rc={out.returncode} {out.stdout!r}")
    return out.stdout.strip() == "delivered"


NO_DEBUG_TRAPS = r"gdbtrace: this machine does not deliver debug-register traps"


def available_collectors() -> dict:
    """{name: description} of the tracepoint collectors the server under test can create here
    (`monitor gdbtrace backend`); {} for stock gdbserver."""
    global _collectors
    if _collectors is None:
        _collectors = {}
        if not is_stock_gdbserver():
            run = run_gdb(["monitor gdbtrace backend"], program="trace_loop", args=(1,))
            _collectors = dict(re.findall(r"^\s+(module|ebpf|ptrace): (.*)$", run.output, re.M))
    return _collectors


def auto_backend() -> str:
    """The collector `backend auto` picks for a plain tracepoint: the first available of module,
    eBPF, ptrace (the engine's preference order)."""
    found = available_collectors()
    return next((name for name in ("module", "ebpf", "ptrace") if name in found), "ptrace")


# ----------------------------------------------------------------------------------------------
# Process bookkeeping


def _become_subreaper():
    PR_SET_CHILD_SUBREAPER = 36
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except OSError:
        pass  # best effort: without it orphans are still found while their parent lives


_become_subreaper()


def _parent_map() -> dict:
    parents = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # Field 4 is the ppid; the command name (field 2) may contain spaces, so split after ')'.
        fields = stat[stat.rfind(")") + 2:].split()
        parents[int(entry)] = int(fields[1])
    return parents


def descendants(root: int = None) -> set:
    root = os.getpid() if root is None else root
    parents = _parent_map()
    found, frontier = set(), {root}
    while frontier:
        children = {pid for pid, ppid in parents.items() if ppid in frontier and pid not in found}
        found |= children
        frontier = children
    return found


def kill_new_processes(before: set, keep: set = frozenset()):
    """SIGKILL every descendant of this process that did not exist in `before` (and is not in keep),
    then reap the ones that became our children. A new process whose parent was there before is that
    process's, not ours: a test's Tracee that forks on after gdb detached must not see a child it
    waits for die of SIGKILL (that was test_debug_mt_fork's "race at detach")."""
    for _ in range(3):
        # One snapshot of the process tree, walked from this process without entering the subtree
        # of a process that was there before.
        parents = _parent_map()
        victims, frontier = set(), {os.getpid()}
        while frontier:
            children = {pid for pid, ppid in parents.items() if ppid in frontier and pid not in victims}
            victims |= children
            frontier = children - before
        victims -= before | set(keep)
        if not victims:
            return
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)
        for pid in victims:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


def process_state(pid: int) -> str:
    """One-letter state from /proc/PID/stat ('R', 'S', 't' traced-stop, 'T', 'Z'), '' if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat[stat.rfind(")") + 2:].split()[0]


def tracer_pid(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("TracerPid:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ----------------------------------------------------------------------------------------------
# A stub started by the harness or by the test


class ServerStartError(AssertionError):
    pass


class Server:
    """`SERVER [server_args] --once|--multi|--attach :PORT [PROGRAM ARGS | PID]`, waiting for
    "Listening on port". Use as a context manager or call stop(). Its stdout+stderr (which include the
    inferior's output) go to a log file: .log()."""

    def __init__(self, mode="multi", program=None, args=(), pid=None, server_args=(), once=None,
                 binary=None, startup_timeout=15, env=None):
        self.binary = binary or server_path()
        # The server's TMPDIR (where gdbtrace-server saves a trace gdb would lose, e.g. at the end of
        # a `target remote` session): a directory of its own, removed by stop(), unless ENV names one.
        self._tmpdir = None
        env = dict(env or {})
        if "TMPDIR" not in env:
            self._tmpdir = tempfile.mkdtemp(prefix="gdbtrace-server-tmp-")
            env["TMPDIR"] = self._tmpdir
        self._env = {**os.environ, **env}
        self.mode = mode
        self.port = None
        self.proc = None
        self._logfile = tempfile.NamedTemporaryFile(prefix="gdbtrace-server-", suffix=".log",
                                                    delete=False)
        self._start(mode, program, args, pid, list(server_args), once, startup_timeout)

    def _command(self, mode, program, args, pid, server_args, once, port):
        cmd = [self.binary] + server_args
        if mode == "attach":
            return cmd + ["--attach", f":{port}", str(pid)]
        if mode == "multi" or program is None:
            cmd.append("--multi")
        if once if once is not None else mode == "once":
            cmd.append("--once")
        cmd.append(f":{port}")
        if mode != "multi" and program is not None:
            cmd += [program] + [str(a) for a in args]
        return cmd

    def _start(self, mode, program, args, pid, server_args, once, startup_timeout):
        for _attempt in range(3):
            port = free_port()
            self.command = self._command(mode, program, args, pid, server_args, once, port)
            start_offset = self._logfile.tell()
            # The inferior inherits the server's cwd: keep files it may write out of the source tree.
            self.proc = subprocess.Popen(self.command, stdin=subprocess.DEVNULL, cwd=tempfile.gettempdir(),
                                         stdout=self._logfile, stderr=subprocess.STDOUT, env=self._env)
            deadline = time.time() + startup_timeout
            while time.time() < deadline:
                text = self.log()[start_offset:]
                if re.search(r"Listening on port \d+", text):
                    self.port = port
                    return
                if self.proc.poll() is not None:
                    break
                time.sleep(0.02)
            text = self.log()[start_offset:]
            self._kill()
            if "already in use" not in text:
                raise ServerStartError(
                    f"server did not start listening: {' '.join(self.command)}\n--- log ---\n{text}")
        raise ServerStartError(f"no free port after 3 attempts: {' '.join(self.command)}")

    def log(self) -> str:
        try:
            return Path(self._logfile.name).read_text(errors="replace")
        except OSError:
            return ""

    @property
    def address(self) -> str:
        return f":{self.port}"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
        if self.proc:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def stop(self):
        self._kill()
        if self._tmpdir:
            shutil.rmtree(self._tmpdir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        try:
            os.unlink(self._logfile.name)
        except OSError:
            pass


class Tracee:
    """A program started by the test (not under any debugger), e.g. to attach to."""

    def __init__(self, program_path, args=()):
        self.proc = subprocess.Popen([program_path] + [str(a) for a in args], stdin=subprocess.DEVNULL,
                                     cwd=tempfile.gettempdir(),
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.pid = self.proc.pid

    def state(self) -> str:
        return process_state(self.pid)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.kill()


# ----------------------------------------------------------------------------------------------
# Batch CLI sessions


@dataclass
class GdbRun:
    stdout: str
    stderr: str
    returncode: int
    server_log: str
    command: list = field(default_factory=list)
    timed_out: bool = False

    @property
    def output(self) -> str:
        """stdout and stderr of gdb together (gdb prints errors and warnings to stderr)."""
        return self.stdout + "\n" + self.stderr

    def transcript(self) -> str:
        return (f"$ {' '.join(self.command)}\n--- gdb stdout ---\n{self.stdout}\n--- gdb stderr ---\n"
                f"{self.stderr}\n--- server log ---\n{self.server_log}\n--- returncode {self.returncode}"
                f"{' (TIMED OUT)' if self.timed_out else ''} ---")


_BLOCK_START = re.compile(r"^\s*(actions|commands|define|document|python|while|if|while-stepping|stepping|ws)\b")


def _gdb_script_args(commands, tmpdir):
    """Turns the command list into gdb -ex arguments. Multi-line blocks (actions ... end, commands ...
    end, python ... end) are written to a file and sourced, since -ex takes one line; each -ex runs even
    if an earlier one failed, which is what a test wants."""
    args, block, depth = [], [], 0
    for line in commands:
        if depth == 0 and not _BLOCK_START.match(line):
            args += ["-ex", line]
            continue
        block.append(line)
        if _BLOCK_START.match(line) and not (line.strip().startswith("python") and len(line.split()) > 1):
            depth += 1
        elif line.strip() == "end":
            depth -= 1
        if depth == 0:
            path = os.path.join(tmpdir, f"block{len(args)}.gdb")
            Path(path).write_text("\n".join(block) + "\n")
            args += ["-ex", f"source {path}"]
            block = []
    if block:  # unterminated block: let gdb complain about it
        path = os.path.join(tmpdir, "block-unterminated.gdb")
        Path(path).write_text("\n".join(block) + "\n")
        args += ["-ex", f"source {path}"]
    return args


GDB_SETUP = ["set pagination off", "set width 0", "set height 0", "set confirm off",
             "set debuginfod enabled off", "set style enabled off"]


def gdb_base_command(program_path=None, interpreter=None):
    cmd = [GDB, "-nx", "-q"]
    if interpreter:
        cmd.append(f"-i={interpreter}")
    for setting in GDB_SETUP:
        cmd += ["-iex", setting]
    return cmd


def run_gdb(commands, program=None, args=(), server_args=(), timeout=60, extended=True, mode="once",
            mi=False, server=None, gdb_args=(), connect=True, server_env=None):
    """Runs gdb against a fresh stub (or `server`, left running) and returns what happened.
    `program` is a test program name (tests/programs) or a path. `connect=False` leaves the
    `target ...` command to the test's own commands."""
    prog = None
    if program is not None:
        prog = program if "/" in program else globals()["program"](program)
    if mi:
        from gdbtest_mi import run_mi  # gdbtest_mi imports this module: imported at the call
        return run_mi(commands, prog, args, server_args, timeout, extended, mode, server, server_env)

    before = descendants()
    own_server = server is None
    tracee = None
    tmpdir = tempfile.mkdtemp(prefix="gdbtest-")
    target = "extended-remote" if extended else "remote"
    try:
        if own_server and mode == "attach":
            tracee = Tracee(prog, args)
            time.sleep(0.2)  # let it get past the dynamic loader
            server = Server("attach", pid=tracee.pid, server_args=server_args, env=server_env)
        elif own_server and mode != "stdio":
            server = Server(mode, program=prog, args=args, server_args=server_args, env=server_env)

        cmd = gdb_base_command() + ["-batch"] + list(gdb_args)
        if prog:
            cmd.append(prog)
        if connect:
            if mode == "stdio":
                quoted = " ".join([server_path()] + list(server_args) + ["-", prog or ""] +
                                  [str(a) for a in args])
                cmd += ["-ex", f"target {target} | {quoted}"]
            else:
                if mode == "multi" and prog:
                    cmd += ["-ex", f"set remote exec-file {prog}"]
                    if args:
                        cmd += ["-ex", "set args " + " ".join(str(a) for a in args)]
                cmd += ["-ex", f"target {target} {server.address}"]
        cmd += _gdb_script_args(commands, tmpdir)

        timed_out = False
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, errors="replace")
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            proc.kill()
            out, err = proc.communicate()
        # Give a --once server a moment to notice the disconnect and flush its log.
        if own_server and server is not None and server.proc is not None:
            try:
                server.proc.wait(timeout=2 if mode == "once" else 0.2)
            except subprocess.TimeoutExpired:
                pass
        log = server.log() if server is not None else ""
        run = GdbRun(out, err, proc.returncode, log, cmd, timed_out)
        if os.environ.get("GDBTRACE_KEEP_LOGS"):
            print(run.transcript())
        return run
    finally:
        end_run(server, own_server, tracee, before)


def end_run(server, own_server, tracee, before):
    """After run_gdb / run_mi: stops the server if the run started it (OWN_SERVER), kills the tracee
    it started, and every process started since BEFORE except a caller's server and its children."""
    if own_server and server is not None:
        server.__exit__()
    if tracee is not None:
        tracee.kill()
    keep = set() if own_server else descendants(server.proc.pid) | {server.proc.pid}
    kill_new_processes(before, keep)


# ----------------------------------------------------------------------------------------------
# Raw Remote Serial Protocol (for tests that talk to the stub without gdb)


def rsp_escape_checksum(payload: bytes) -> bytes:
    return b"%02x" % (sum(payload) & 0xFF)


class ClosedOnExit:
    """`with X(...) as x:` calls x.close() at the end (RspClient, MiSession)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class RspClient(ClosedOnExit):
    """Minimal RSP client over TCP: send(payload) -> reply payload (acks handled, no-ack mode optional).
    Binary-safe: payloads are bytes (str is encoded as latin-1)."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 10):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.timeout = timeout
        self.ack = True
        self._buf = b""

    def _recv_more(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise EOFError("RSP: connection closed by the stub")
        self._buf += chunk

    def send_raw(self, data: bytes):
        self.sock.sendall(data)

    def packet(self, payload) -> bytes:
        payload = payload.encode("latin-1") if isinstance(payload, str) else payload
        return b"$" + payload + b"#" + rsp_escape_checksum(payload)

    def read_reply(self) -> bytes:
        """Next packet from the stub; acks ('+') and notifications ('%...#xx') are skipped."""
        while True:
            match = re.search(rb"([$%])([^#]*)#([0-9a-fA-F]{2})", self._buf, re.DOTALL)
            if not match:
                self._recv_more()
                continue
            self._buf = self._buf[match.end():]
            kind, payload, checksum = match.group(1), match.group(2), match.group(3)
            if kind == b"%":
                continue
            if self.ack:
                self.sock.sendall(b"+")
            if checksum.lower() != rsp_escape_checksum(payload):
                raise ValueError(f"RSP: bad checksum from stub: {payload!r} #{checksum!r}")
            return payload

    def send(self, payload, expect_reply: bool = True) -> bytes:
        self.sock.sendall(self.packet(payload))
        return self.read_reply() if expect_reply else b""

    def start_no_ack(self):
        if self.send("QStartNoAckMode") == b"OK":
            self.ack = False

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


# ----------------------------------------------------------------------------------------------
# unittest helpers


class _StrictSkips:
    """A unittest result that records a skip as a failure when skip_fails(reason): skipTest(),
    @unittest.skipIf and SkipTest raised anywhere in a test all end in addSkip."""

    def __init__(self, result):
        self._result = result

    def __getattr__(self, name):
        return getattr(self._result, name)

    def addSkip(self, test, reason):
        if not skip_fails(reason):
            return self._result.addSkip(test, reason)
        try:
            raise AssertionError("skipped under CI=true / GDBTRACE_STRICT=1 (a skip would hide what was "
                                 f"not tested; GDBTRACE_ALLOW_SKIP does not allow it): {reason}")
        except AssertionError:
            return self._result.addFailure(test, sys.exc_info())


class GdbTestCase(unittest.TestCase):
    """Assertions that dump the full gdb/server transcript when they fail; in strict() mode a skip
    is a failure (see skip_fails)."""

    maxDiff = None

    def run(self, result=None):
        return super().run(_StrictSkips(result if result is not None else self.defaultTestResult()))

    def assertRan(self, run: GdbRun):
        if run.timed_out:
            self.fail("gdb timed out\n" + run.transcript())

    def assertOutput(self, run: GdbRun, pattern: str, msg: str = ""):
        """pattern (regex, MULTILINE) must occur in gdb's stdout+stderr."""
        self.assertRan(run)
        if not re.search(pattern, run.output, re.MULTILINE):
            self.fail(f"{msg or 'pattern not found'}: {pattern!r}\n{run.transcript()}")

    def assertOutputs(self, run: GdbRun, patterns, msg: str = ""):
        """Every one of PATTERNS occurs in gdb's output (in any order: assertOrdered for an order)."""
        for pattern in patterns:
            self.assertOutput(run, pattern, msg)

    def assertNoOutput(self, run: GdbRun, pattern: str, msg: str = ""):
        """pattern must not occur in gdb's output, of a run that finished (a timed-out run may have
        stopped before printing it)."""
        self.assertRan(run)
        if re.search(pattern, run.output, re.MULTILINE):
            self.fail(f"{msg or 'unexpected output'}: {pattern!r}\n{run.transcript()}")

    def assertOrdered(self, run: GdbRun, patterns, msg: str = ""):
        """Each pattern must occur after the previous one in gdb's output."""
        self.assertRan(run)
        pos = 0
        for pattern in patterns:
            m = re.compile(pattern, re.MULTILINE).search(run.output, pos)
            if not m:
                self.fail(f"{msg or 'pattern not found in order'}: {pattern!r} after offset {pos}\n"
                          f"{run.transcript()}")
            pos = m.end()

    def assertServerLog(self, run: GdbRun, pattern: str, msg: str = ""):
        if not re.search(pattern, run.server_log + run.stderr, re.MULTILINE):
            self.fail(f"{msg or 'pattern not in server log / inferior output'}: {pattern!r}\n"
                      f"{run.transcript()}")


_MI_NAMES = {"MiParseError", "MiRecord", "MiSession", "mi_connected", "parse_mi_record", "parse_mi_value"}


def __getattr__(name):
    """The MI half of the harness (gdbtest_mi.py, which imports this module): tests import its names
    from here; it is loaded on the first such import, so either module can be imported first."""
    if name in _MI_NAMES:
        import gdbtest_mi
        return getattr(gdbtest_mi, name)
    raise AttributeError(f"module 'gdbtest' has no attribute {name!r}")
