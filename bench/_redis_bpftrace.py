"""A real server nobody here wrote, against bpftrace (bench/redis_bpftrace.sh; issue 29).

Debian's redis-server under redis-benchmark (64 clients, SET/GET), twice: as configured by default
(reads in the main thread) and with `io-threads 2` (reads in an I/O thread too: hits from two
threads at once; much slower on two shared CPUs, where its threads spin). Attached by the stub
(`gdbtrace-server --attach`), eBPF collector, gdb's default trace buffer, `collect $regs` on libc's `read` (every request is a read() on its client
socket), streamed to a file (`monitor gdbtrace stream`) for WINDOW seconds (60; smoke 3). Over the
same window an independent `bpftrace` uprobe counts libc `read` in the same process (`/pid == N/`).

The window: the stub's attach stops every thread of redis (ptrace) and they stay stopped until gdb's
`continue`; bpftrace is attached while they are stopped, the tracepoint installed (`tstart`) while
they are stopped; after WINDOW seconds gdb interrupts the process (every thread stops), `tstop`,
and only then bpftrace is stopped (SIGINT: it prints its count), and gdb detaches. So both count
exactly the hits of the one stretch in which redis ran: no gate, no pause of the load generator
needed (redis-benchmark's clients wait on their sockets while redis is stopped). Both probe the same
instruction: the tracepoint is `trace *ADDR` with ADDR = libc's load address + `read`'s value in
libc's dynamic symbol table, where bpftrace resolves `uprobe:LIBC:read`.

A session that does not end (gdb's timeout) or a stub that stays after it is logged with every
thread's state and kernel stack, and the script exits 1 (broken) after its rows.

Judged (exit 3 on a MISS): the frames in the streamed file, read by gdb (`target tfile`, tstatus;
loss markers are not frames) == bpftrace's count, and gdb opens the stream (first and last frame
found by tfind, the tracepoint known at the libc address).
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import _bench as B

FUNCTION = "read"


def tools():
    """The programs the script needs (scripts/packages.txt installs them), or the first missing."""
    found = {t: shutil.which(t) for t in ("redis-server", "redis-benchmark", "redis-cli", "bpftrace")}
    missing = [t for t, path in found.items() if not path]
    return found, (missing[0] if missing else None)


def libc_of(pid):
    """(path, load address) of the libc mapped by PID (its mapping at file offset 0)."""
    for line in open(f"/proc/{pid}/maps"):
        parts = line.split()
        if len(parts) >= 6 and re.search(r"/libc\.so\.6$", parts[5]) and int(parts[2], 16) == 0:
            return parts[5], int(parts[0].split("-")[0], 16)
    return None, None


def dynamic_symbol(lib, name):
    """NAME's value in LIB's dynamic symbol table (what bpftrace's uprobe:LIB:NAME resolves)."""
    out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2].split("@")[0] == name:
            return int(parts[0], 16)
    return None


def wait_ping(cli, port, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if subprocess.run([cli, "-p", str(port), "ping"], capture_output=True, text=True).stdout.strip() == "PONG":
            return True
        time.sleep(0.1)
    return False


def commands_processed(cli, port):
    out = subprocess.run([cli, "-p", str(port), "info", "stats"], capture_output=True, text=True).stdout
    m = re.search(r"total_commands_processed:(\d+)", out)
    return int(m.group(1)) if m else None


class Bpftrace:
    """`bpftrace` counting uprobe LIB:FUNCTION hits of PID (in all and by thread) until stop()."""

    def __init__(self, exe, lib, pid, work):
        prog = (f'BEGIN {{ printf("READY\\n"); }} uprobe:{lib}:{FUNCTION} /pid == {pid}/ '
                f'{{ @hits = count(); @by_tid[tid] = count(); }}')
        self.done = os.path.join(work, "bpftrace.done")
        self.proc = subprocess.Popen([exe, "-B", "line", "-e", prog], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.lines, self.ready = [], threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line)
            if line.strip() == "READY":
                self.ready.set()
        self.proc.wait()
        open(self.done, "w").close()  # the gdb script waits for this before it detaches
        self.ready.set()

    def stop_command(self):
        """A shell command (for gdb's `shell`) that stops bpftrace and waits until it printed (at
        most 60 s: then it is killed, and result() says it failed)."""
        return (f"kill -INT {self.proc.pid}; for i in $(seq 600); do [ -e {self.done} ] && break; "
                f"sleep 0.1; done; [ -e {self.done} ] || kill -KILL {self.proc.pid}")

    def result(self):
        """(hits, {tid: hits}) or (None, reason)."""
        self.reader.join(timeout=30)
        text = "".join(self.lines)
        if not self.ready.is_set() or "READY" not in text:
            return None, "bpftrace_failed:" + re.sub(r"\s+", "_", text.strip())[-120:]
        m = re.search(r"^@hits: (\d+)$", text, re.M)
        by_tid = {int(t): int(n) for t, n in re.findall(r"^@by_tid\[(\d+)\]: (\d+)$", text, re.M)}
        return (int(m.group(1)) if m else 0), by_tid

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def session_script(port, addr, stream, window, stop_bpftrace):
    return "\n".join([
        "set sysroot /",  # the libraries are this machine's: no file transfers over the remote protocol
        f"target remote :{port}",
        "monitor gdbtrace backend ebpf",
        f"trace *{addr:#x}", "actions", "collect $regs", "end",
        f"monitor gdbtrace stream {stream}",
        "tstart",
        # After WINDOW seconds every thread stops (the stub's interrupt), then the trace stops.
        "python",
        "import threading",
        f"threading.Timer({window}, lambda: gdb.post_event(lambda: gdb.execute('interrupt'))).start()",
        "end",
        "continue",
        "tstop", "tstatus", "monitor gdbtrace status",
        f"shell {stop_bpftrace}",
        "info tracepoints",
        "detach"]) + "\n"


def read_stream(stream):
    """gdb on the streamed file: (frames created, frames with markers, gdb's output); the first
    and last frame looked at with tfind."""
    text = B.gdb(f"target tfile {stream}\ntstatus\n")
    created = re.search(r"Buffer contains (\d+) trace frames \(of (\d+) created", text)
    if created:
        total, frames = int(created.group(1)), int(created.group(2))
    else:
        frames = total = B.frames_collected(text)
    if total:
        text += B.gdb("\n".join([f"target tfile {stream}", "tfind 0", "print/x $pc", f"tfind {total - 1}",
                                 "print/x $pc", "info tracepoints"]) + "\n")
    return frames, total, text


def run_case(found, io_threads, window):
    """One traced window of redis-server with IO_THREADS I/O threads; prints its row and judgement."""
    port = B.gdbtest.free_port()
    threaded = ["--io-threads", str(io_threads), "--io-threads-do-reads", "yes"] if io_threads > 1 else []
    redis = subprocess.Popen([found["redis-server"], "--port", str(port), "--save", "", "--appendonly", "no",
                              "--dir", B.WORK] + threaded, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    bench = bpf = server = None
    text = ""
    try:
        if not wait_ping(found["redis-cli"], port):
            sys.exit("redis-server did not answer PING")
        bench = subprocess.Popen([found["redis-benchmark"], "-p", str(port), "-t", "set,get", "-c", "64",
                                  "-n", "2000000000", "-r", "100000", "-q"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1)
        lib, base = libc_of(redis.pid)
        value = dynamic_symbol(lib, FUNCTION) if lib else None
        if value is None:
            sys.exit(f"no libc {FUNCTION} in redis-server's maps ({lib})")
        addr = base + value
        server = B.gdbtest.Server("attach", pid=redis.pid, binary=B.SERVER)  # every thread stops
        threads = len(os.listdir(f"/proc/{redis.pid}/task"))
        bpf = Bpftrace(found["bpftrace"], lib, redis.pid, B.WORK)
        if not bpf.ready.wait(60):
            sys.exit("bpftrace did not attach in 60 s")
        stream = os.path.join(B.WORK, f"redis-io{io_threads}.tf")
        t0 = time.time()
        # The session takes the window plus a few seconds (attach, tstop, bpftrace's exit).
        text = B.gdb(session_script(server.port, addr, stream, window, bpf.stop_command()),
                     timeout=window + (120 if B.SMOKE else 600))
        wall = time.time() - t0
        if text.endswith("\nTIMEOUT\n"):
            B.broken(f"redis io-threads {io_threads}: the gdb session did not end in {round(wall)} s; "
                     "gdb's output, then the stub's and redis-server's threads:\n" + text[-3000:] +
                     B.process_states(server.proc.pid, "gdbtrace-server") +
                     B.process_states(redis.pid, "redis-server"))
        counted, by_tid = bpf.result()
        try:
            server.proc.wait(timeout=30)  # gdb detached: the stub ends
        except subprocess.TimeoutExpired:
            B.broken(f"redis io-threads {io_threads}: the stub did not end 30 s after gdb:\n" +
                     B.process_states(server.proc.pid, "gdbtrace-server"))
        cmds = commands_processed(found["redis-cli"], port)
    finally:
        if server:
            server.stop()  # first: a stub left attached (a broken session) would hold redis's SIGTERM
        for p in (bench, redis):
            if p and p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        if bpf:
            bpf.kill()
    B.log(text[-4000:])
    status = B.stub_status(text)
    tp = next(iter(status.values()), {})
    frames, total, read = read_stream(stream) if os.path.exists(stream) else (None, None, "")
    B.log(read[-2000:])
    opened = frames is not None and bool(re.search(r"Found trace frame 0, tracepoint 1", read)) and \
        bool(re.search(rf"Found trace frame {total - 1}, tracepoint 1", read)) and \
        len(re.findall(rf"^\$\d+ = {addr:#x}$", read, re.M)) == 2
    workload = f"redis-io{io_threads}:{FUNCTION}:$regs"
    B.row("gdbtrace-ebpf", workload, None if frames is None else frames, unit="frames",
          column="real-server", window_s=window, io_threads=io_threads, gdb_session_s=round(wall, 1),
          bpftrace_hits=counted, frames=frames, frames_with_markers=total, stub_hits=tp.get("hits"),
          stub_drops=tp.get("drops"), backend=tp.get("backend"), redis_threads=threads,
          threads_hitting=len(by_tid) if counted is not None else None,
          by_thread=",".join(str(n) for n in sorted(by_tid.values(), reverse=True)) if counted is not None else None,
          reason=by_tid if counted is None else None,  # result() gives the reason then
          hits_per_s=round(counted / window) if counted else None, commands_processed=cmds,
          file_bytes=os.path.getsize(stream) if os.path.exists(stream) else None,
          load=open("/proc/loadavg").read().split()[0])
    ok = counted is not None and frames is not None and frames == counted and opened and \
        tp.get("backend") == "ebpf"
    B.judge(ok, f"redis-server ({io_threads} I/O threads) attached, eBPF collect $regs on libc {FUNCTION} for "
                f"{window} s streamed: frames in the file (gdb target tfile) == bpftrace's count of the same "
                f"window: {frames} vs {counted} (stub hits {tp.get('hits')}, drops {tp.get('drops')}, backend "
                f"{tp.get('backend')}); gdb opens the stream: {'yes' if opened else 'no'}")


def main():
    window = B.n(60, 3)
    found, missing = tools()
    if missing:
        B.row("gdbtrace-ebpf", f"redis:{FUNCTION}:$regs", None, reason=f"{missing}_missing")
        B.judge(False, f"redis-server traced on libc {FUNCTION} == bpftrace: no measurement ({missing} "
                       "missing; scripts/packages.txt lists it)")
        return B.exit_code()
    # Reads in the main thread alone (redis's default: the higher hit rate), then in the main thread
    # and an I/O thread (redis's io-threads: hits from two threads at once).
    for io_threads in (1, 2):
        run_case(found, io_threads, window)
    return B.exit_code()


if __name__ == "__main__":
    sys.exit(main())
