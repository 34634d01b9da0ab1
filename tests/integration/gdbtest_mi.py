"""gdb's MI for the integration tests (part of the harness, gdbtest.py, which re-exports these
names: tests import them from gdbtest): MI record parsing, MiSession (`gdb -i=mi` through pipes, as
an IDE drives it), mi_connected, and run_mi behind run_gdb(..., mi=True)."""

import os
import re
import select
import subprocess
import time
from dataclasses import dataclass

from gdbtest import (ClosedOnExit, GdbRun, Server, Tracee, descendants, end_run, gdb_base_command,
                     kill_new_processes, program, server_path)


class MiParseError(ValueError):
    pass


def parse_mi_value(text: str, pos: int = 0):
    """Parses an MI value (c-string, tuple {...} or list [...]) at pos; returns (value, new_pos)."""
    ch = text[pos]
    if ch == '"':
        out, i = [], pos + 1
        while text[i] != '"':
            if text[i] == "\\":
                i += 1
                esc = text[i]
                if esc in "01234567":
                    digits = text[i:i + 3]
                    out.append(chr(int(digits, 8)))
                    i += 3
                    continue
                out.append({"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}.get(esc, esc))
            else:
                out.append(text[i])
            i += 1
        return "".join(out), i + 1
    if ch == "{":
        return _parse_results(text, pos + 1, "}")
    if ch == "[":
        if text[pos + 1] == "]":
            return [], pos + 2
        # A list holds either values or results (name=value).
        if re.match(r"[a-zA-Z_][\w-]*=", text[pos + 1:]):
            items, i = [], pos + 1
            while True:
                name_end = text.index("=", i)
                name = text[i:name_end]
                value, i = parse_mi_value(text, name_end + 1)
                items.append((name, value))
                if text[i] == "]":
                    return items, i + 1
                if text[i] != ",":
                    raise MiParseError(f"bad list at {i}: {text!r}")
                i += 1
        items, i = [], pos + 1
        while True:
            value, i = parse_mi_value(text, i)
            items.append(value)
            if text[i] == "]":
                return items, i + 1
            if text[i] != ",":
                raise MiParseError(f"bad list at {i}: {text!r}")
            i += 1
    raise MiParseError(f"unexpected {ch!r} at {pos}: {text!r}")


def _parse_results(text: str, pos: int, closer: str):
    result, i = {}, pos
    if i < len(text) and text[i] == closer:
        return result, i + 1
    while True:
        name_end = text.index("=", i)
        name = text[i:name_end]
        value, i = parse_mi_value(text, name_end + 1)
        result[name] = value
        if i >= len(text) or text[i] == closer:
            return result, i + 1
        if text[i] != ",":
            raise MiParseError(f"bad results at {i}: {text!r}")
        i += 1


def parse_mi_record(line: str):
    """'12^done,a="1"' -> ('12', '^', 'done', {'a': '1'}); stream records -> (None, '~', text, {})."""
    m = re.match(r"^(\d*)([\^*+=~@&])", line)
    if not m:
        return None
    token, kind = m.group(1) or None, m.group(2)
    rest = line[m.end():]
    if kind in "~@&":
        value, _ = parse_mi_value(rest, 0)
        return token, kind, value, {}
    cls, _, results = rest.partition(",")
    parsed = _parse_results(results + "\x00", 0, "\x00")[0] if results else {}
    return token, kind, cls, parsed


@dataclass
class MiRecord:
    token: str
    kind: str  # ^ result, * exec-async, = notify, + status, ~ console, @ target, & log
    cls: str  # done/running/error/stopped/... (stream text for ~ @ &)
    results: dict
    line: str


class MiSession(ClosedOnExit):
    """`gdb -i=mi` driven through pipes. send() returns the ^result record; records seen so far
    are in .records (all) and the console text in .console()."""

    def __init__(self, program=None, server=None, timeout=30):
        self.timeout = timeout
        self.records = []
        self.transcript = []
        self._buffer = b""
        self._token = 100
        self.server = server
        cmd = gdb_base_command(interpreter="mi")
        if program:
            cmd.append(program)
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        os.set_blocking(self.proc.stdout.fileno(), False)
        self._read_until(None)

    def _readline(self, deadline):
        while b"\n" not in self._buffer:
            remaining = deadline - time.time()
            if remaining <= 0:
                raise TimeoutError("MI: timed out\n" + "\n".join(self.transcript[-40:]))
            ready, _, _ = select.select([self.proc.stdout], [], [], min(remaining, 0.5))
            if ready:
                chunk = self.proc.stdout.read(65536)
                if not chunk:
                    if self.proc.poll() is not None:
                        raise EOFError("MI: gdb exited\n" + "\n".join(self.transcript[-40:]))
                    continue
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode(errors="replace").rstrip("\r")

    def _read_until(self, predicate, timeout=None):
        """Reads lines until a record satisfies predicate (returned), or, with predicate None,
        until the next (gdb) prompt."""
        deadline = time.time() + (timeout or self.timeout)
        while True:
            line = self._readline(deadline)
            self.transcript.append(line)
            if line.strip() == "(gdb)":
                if predicate is None:
                    return None
                continue
            parsed = parse_mi_record(line)
            if parsed is None:
                continue
            rec = MiRecord(parsed[0], parsed[1], parsed[2], parsed[3], line)
            self.records.append(rec)
            if predicate is not None and predicate(rec):
                return rec

    def run_to_breakpoint(self, command: str) -> MiRecord:
        """Sends COMMAND (`-exec-run`, a console `run`, ...) and returns the first *stopped at a
        breakpoint after it, passing over other stops (in non-stop mode, a new thread's)."""
        mark = len(self.records)
        self.send(command)
        stop = self.wait_stopped(mark)
        while stop.results.get("reason") != "breakpoint-hit":
            stop = self.wait_stopped(self.records.index(stop) + 1)
        return stop

    def send(self, command: str, timeout=None) -> MiRecord:
        """Sends an MI command (or CLI command) with a token; returns its ^ result record."""
        self._token += 1
        token = str(self._token)
        line = command if not command.startswith("-") else token + command
        if command.startswith("-"):
            match = lambda rec: rec.kind == "^" and rec.token == token
        else:
            match = lambda rec: rec.kind == "^"
        self.transcript.append(">>> " + line)
        self.proc.stdin.write((line + "\n").encode())
        self.proc.stdin.flush()
        return self._read_until(match, timeout=timeout)

    def wait_for(self, kind: str, cls: str, timeout=None, since: int = 0) -> MiRecord:
        """Returns the first record of this kind/class at index >= since, reading more as needed."""
        for rec in self.records[since:]:
            if rec.kind == kind and rec.cls == cls:
                return rec
        return self._read_until(lambda rec: rec.kind == kind and rec.cls == cls,
                                timeout=timeout)

    def wait_stopped(self, since: int, timeout=None) -> MiRecord:
        return self.wait_for("*", "stopped", timeout, since)

    def continue_and_interrupt(self, run_for=0.3, all_threads=False) -> MiRecord:
        """-exec-continue, RUN_FOR seconds, -exec-interrupt: the *stopped record that follows
        (asserted to be the ^C's SIGINT by the caller)."""
        flag = " --all" if all_threads else ""
        mark = len(self.records)
        running = self.send("-exec-continue" + flag)
        if running.cls != "running":
            raise AssertionError(f"-exec-continue{flag}: {running.line}")
        time.sleep(run_for)
        self.send("-exec-interrupt" + flag)
        return self.wait_stopped(mark)

    def console(self) -> str:
        return "".join(rec.cls for rec in self.records if rec.kind in "~@&")

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(b"-gdb-exit\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=10)
            except (BrokenPipeError, subprocess.TimeoutExpired, OSError):
                self.proc.kill()
                self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                pipe.close()
            except OSError:
                pass


class mi_connected:
    """Context manager: a fresh server plus an MI session connected to it; cleans both up.
        with mi_connected("demo", args=(3, 0), mode="multi", setup=["-gdb-set non-stop on"]) as mi:
            mi.send("-exec-run") ...
    `setup` MI commands run before -target-select (non-stop, mi-async must be set before connecting)."""

    def __init__(self, program_name=None, args=(), mode="multi", server_args=(), setup=(), timeout=30,
                 extended=True):
        self.prog = program(program_name) if program_name and "/" not in program_name else program_name
        self.args, self.mode, self.server_args = args, mode, server_args
        self.setup, self.timeout, self.extended = setup, timeout, extended
        self.server = self.session = self.tracee = None

    def __enter__(self) -> MiSession:
        self.before = descendants()
        try:
            if self.mode == "attach":
                self.tracee = Tracee(self.prog, self.args)
                time.sleep(0.2)
                self.server = Server("attach", pid=self.tracee.pid, server_args=self.server_args)
            else:
                self.server = Server(self.mode, program=self.prog, args=self.args,
                                     server_args=self.server_args)
            self.session = MiSession(self.prog, self.server, timeout=self.timeout)
            for command in self.setup:
                self.session.send(command)
            if self.mode == "multi" and self.prog:
                self.session.send(f"-gdb-set remote exec-file {self.prog}")
                if self.args:
                    self.session.send("-exec-arguments " + " ".join(str(a) for a in self.args))
            target = "extended-remote" if self.extended else "remote"
            rec = self.session.send(f"-target-select {target} {self.server.address}")
            if rec.cls != "connected":
                raise AssertionError(f"-target-select failed: {rec.line}\n" + self.transcript())
            return self.session
        except BaseException:
            self.__exit__()
            raise

    def transcript(self) -> str:
        mi = "\n".join(self.session.transcript) if self.session else ""
        log = self.server.log() if self.server else ""
        return f"--- MI transcript ---\n{mi}\n--- server log ---\n{log}"

    def __exit__(self, *exc):
        if self.session is not None:
            self.session.close()
        if self.server is not None:
            self.server.__exit__()
        if self.tracee is not None:
            self.tracee.kill()
        kill_new_processes(self.before)


def run_mi(commands, prog, args, server_args, timeout, extended, mode, server, server_env=None):
    """run_gdb(mi=True): connects (-target-select), then runs each MI command; a ^running command
    also waits for the following *stopped."""
    before = descendants()
    own_server = server is None
    tracee = None
    session = None
    timed_out = False
    try:
        if own_server and mode == "attach":
            tracee = Tracee(prog, args)
            time.sleep(0.2)
            server = Server("attach", pid=tracee.pid, server_args=server_args, env=server_env)
        elif own_server and mode != "stdio":
            server = Server(mode, program=prog, args=args, server_args=server_args, env=server_env)
        session = MiSession(prog, server, timeout=timeout)
        target = "extended-remote" if extended else "remote"
        if mode == "stdio":
            pipe = " ".join([server_path()] + list(server_args) + ["-", prog or ""] + [str(a) for a in args])
            session.send(f"-target-select {target} | {pipe}")
        else:
            if mode == "multi" and prog:
                session.send(f"-gdb-set remote exec-file {prog}")
            session.send(f"-target-select {target} {server.address}")
        for command in commands:
            mark = len(session.records)
            rec = session.send(command)
            if rec is not None and rec.cls == "running":
                session.wait_stopped(mark)
    except (TimeoutError, EOFError):
        timed_out = True
    finally:
        if session is not None:
            session.close()
        log = server.log() if server is not None else ""
        end_run(server, own_server, tracee, before)
    stdout = "\n".join(session.transcript) if session else ""
    return GdbRun(stdout, "", session.proc.returncode if session else -1, log, ["gdb", "-i=mi"],
                  timed_out)
