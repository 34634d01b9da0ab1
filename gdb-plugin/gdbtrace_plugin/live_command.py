"""`gdbtrace live`: trace frames printed as they arrive while the program runs."""

import threading
import time

import gdb

from . import batch, decode, stats, frames as frames_mod
from .session import (Threads, UserError, any_linespec, check_gdbtrace, current_stub, register_block_size,
                      tracepoint_defs, tracepoint_map, stub_errors_as_user_errors)
from .transport import StubError



def _parse_live_args(arg):
    opts = {"count": None, "seconds": None, "interval_ms": 200, "from_start": False, "stop": False}
    args = gdb.string_to_argv(arg)
    usage = "usage: gdbtrace live [-n COUNT] [-t SECONDS] [-i INTERVAL_MS] [-all] | gdbtrace live stop"
    if args == ["stop"]:
        opts["stop"] = True
        return opts
    i = 0
    while i < len(args):
        a = args[i]
        try:
            if a in ("-n", "-count") and i + 1 < len(args):
                opts["count"] = int(args[i + 1], 0)
                i += 2
            elif a in ("-t", "-time") and i + 1 < len(args):
                opts["seconds"] = float(args[i + 1])
                i += 2
            elif a in ("-i", "-interval") and i + 1 < len(args):
                opts["interval_ms"] = int(args[i + 1], 0)
                i += 2
            elif a in ("-a", "-all"):
                opts["from_start"] = True
                i += 1
            else:
                raise ValueError
        except ValueError:
            raise UserError(usage)
    if (opts["count"] is not None and opts["count"] <= 0) or (opts["seconds"] is not None and opts["seconds"] <= 0) \
            or opts["interval_ms"] <= 0:
        raise UserError("gdbtrace live: COUNT, SECONDS and INTERVAL_MS must be positive")
    return opts


def format_live_row(plan, row):
    index, ts, tid = row[0], row[1], row[2]
    parts = ["#%d" % index, plan.label]
    if ts is not None:
        parts.append("ts=%s" % ts)
    if tid is not None:
        parts.append("thread=%s" % tid)
    shown = []
    for leaf, v in zip(plan.leaves, row[3:]):
        if v is None:
            shown.append("%s=<unavailable>" % leaf.name)
            continue
        d = leaf.display(v)
        if leaf.kind == "str":
            d = repr(d)
        elif isinstance(d, (int, float)):
            d = stats.fmt_number(d)
        shown.append("%s=%s" % (leaf.name, d))
    return "  ".join(parts) + (": " + "  ".join(shown) if shown else "")


class LivePoller:
    """Polls the stub for new frames and prints them, from gdb's main thread.

    A timer thread posts one poll at a time with gdb.post_event, so the polls
    run inside gdb's event loop: gdb keeps handling the program's events
    (shared-library loads, new threads, stops) between them, which a blocking
    loop inside the command would not allow."""

    current = None

    def __init__(self, opts, stub, runner, offset, ts_tsv):
        self.opts = opts
        self.stub = stub
        self.runner = runner
        self.offset = offset
        self.printed = 0
        self.started = time.monotonic()
        self.reported = set()
        self.finished = False
        self._pending = False
        self._allstop_noted = False
        self._lock = threading.Lock()
        self.discarded = None

    def start(self):
        LivePoller.current = self
        self.inferior_running = any(t.is_running() for t in gdb.selected_inferior().threads())
        self._handlers = [(gdb.events.cont, self._on_cont), (gdb.events.stop, self._on_stop),
                          (gdb.events.exited, self._on_exited)]
        exiting = getattr(gdb.events, "gdb_exiting", None)
        if exiting is not None:
            self._handlers.append((exiting, self._on_exit))
        for registry, handler in self._handlers:
            registry.connect(handler)
        self._thread = threading.Thread(target=self._timer, name="gdbtrace-live", daemon=True)
        self._thread.start()

    # Polls are posted only while the program runs; a stop or the exit is followed at once by a
    # poll on the main thread. gdb 13 crashes at exit if a posted event is still queued, so the
    # timer keeps that window small (one event at a time, none while the program is stopped).
    def _on_cont(self, _event):
        self.inferior_running = True

    def _on_stop(self, _event):
        self.inferior_running = any(t.is_running() for t in gdb.selected_inferior().threads())
        self._poll_now()

    def _on_exited(self, _event):
        self.inferior_running = False
        # A timer poll may be queued behind this event: it would find the view stopped. So the
        # frames the program made before it exited are fetched here, queued poll or not.
        with self._lock:
            queued = self._pending
            self._pending = True
        self._poll(release=not queued)
        self.stop("the program exited")

    def _on_exit(self, _event):
        self.finished = True
        self._thread.join(timeout=2)

    def _poll_now(self):
        with self._lock:
            if self._pending:
                return  # a posted poll is queued and will run
            self._pending = True
        self._poll()

    def _timer(self):
        interval = self.opts["interval_ms"] / 1000.0
        while not self.finished:
            time.sleep(interval)
            with self._lock:
                if self._pending or self.finished or not self.inferior_running:
                    continue
                self._pending = True
            try:
                gdb.post_event(self._poll)
            except RuntimeError:
                return

    def stop(self, reason):
        if self.finished:
            return
        self.finished = True
        if LivePoller.current is self:
            LivePoller.current = None
        for registry, handler in getattr(self, "_handlers", []):
            try:
                registry.disconnect(handler)
            except (RuntimeError, ValueError):
                pass
        gdb.write("gdbtrace live: %d frames shown; %s.\n" % (self.printed, reason))
        gdb.flush()

    def _poll(self, release=True):
        try:
            self._poll_once()
        except StubError as e:
            if "all-stop mode" in str(e):
                if not self._allstop_noted:
                    self._allstop_noted = True
                    gdb.write("gdbtrace live: the target runs in all-stop mode, so frames are fetched only "
                              "while it is stopped (`set non-stop on` before connecting for a live view)\n")
            else:
                self.stop("error: %s" % e)
        except gdb.error as e:
            self.stop("error: %s" % e)
        finally:
            if release:  # else a queued poll still holds the flag and releases it
                with self._lock:
                    self._pending = False

    def _poll_once(self):
        if self.finished:
            return
        status = self.stub.status()
        buf = status.get("buffer") or {}
        discarded = buf.get("discarded")
        skip_below = None
        if discarded is not None and self.discarded is not None and discarded != self.discarded:
            # A circular buffer dropped its oldest frames: byte offsets moved. Read the buffer
            # again from its start (frame numbers = creation order) and print only new frames.
            skip_below = self.runner.next_index
            self.offset = 0
            self.runner.reset(discarded)
        rows = []
        while True:
            data, last = self.stub.frames_chunk(self.offset)
            self.offset += len(data)
            for run in self.runner.feed(data):
                rows.extend((run.plan, row) for row in run.rows
                            if skip_below is None or row[0] >= skip_below)
            if last or not data:
                break
        after = (self.stub.status().get("buffer") or {}).get("discarded") if discarded is not None else None
        if after != discarded:
            # Frames were dropped while we read: what we read may straddle two layouts of the
            # buffer. Print nothing from it; the next poll starts over.
            self.discarded = discarded
            self.runner.next_index = skip_below if skip_below is not None else rows[0][1][0] if rows else \
                self.runner.next_index
            return
        if skip_below is not None:
            dropped = max(0, discarded - skip_below)
            if dropped:
                gdb.write("gdbtrace live: the circular buffer discarded %d frames before they were shown\n"
                          % dropped)
        self.discarded = discarded
        for plan, row in rows:
            for expr, message in plan.problems:
                if (plan.tp, expr) not in self.reported:
                    self.reported.add((plan.tp, expr))
                    gdb.write("gdbtrace: tracepoint %d: cannot decode `%s`: %s\n" % (plan.tp, expr, message))
            gdb.write(format_live_row(plan, row) + "\n")
            self.printed += 1
            if self.opts["count"] is not None and self.printed >= self.opts["count"]:
                gdb.flush()
                return self.stop("%d frames printed" % self.printed)
        gdb.flush()
        if self.opts["seconds"] is not None and time.monotonic() - self.started >= self.opts["seconds"]:
            return self.stop("time limit (%g s)" % self.opts["seconds"])
        if not status.get("running") and not rows:
            self.stop("the trace run is not running (%s)" % (status.get("stop_reason") or "stopped"))


class LiveCommand(gdb.Command):
    """Print trace frames as they arrive while the program runs.

Usage: gdbtrace live [-n COUNT] [-t SECONDS] [-i INTERVAL_MS] [-all]
       gdbtrace live stop
Starts polling the stub every INTERVAL_MS (default 200) for frames after the last
one seen, and prints them decoded as they arrive, until the trace run stops,
COUNT frames were printed, SECONDS passed, or `gdbtrace live stop`. The command
returns at once; let the program run (`continue`, or `continue &` in non-stop
mode). -all starts with the frames already in the buffer.
gdb can talk to the stub while the program runs only in non-stop mode
(`set non-stop on` before connecting); in all-stop mode frames show whenever the
program stops."""

    def __init__(self):
        super().__init__("gdbtrace live", gdb.COMMAND_TRACEPOINTS, gdb.COMPLETE_NONE)

    def invoke(self, arg, from_tty):
        opts = _parse_live_args(arg)
        if opts["stop"]:
            if LivePoller.current is None:
                raise UserError("gdbtrace live: not running")
            LivePoller.current.stop("stopped by `gdbtrace live stop`")
            return
        if LivePoller.current is not None:
            raise UserError("gdbtrace live: already polling (`gdbtrace live stop` first)")
        stub_errors_as_user_errors(lambda: self._start(opts))

    def _start(self, opts):
        stub = current_stub()
        status = check_gdbtrace(stub)
        regblock = register_block_size(stub, status)
        tpdefs = tracepoint_defs()
        ts_tsv = decode.timestamp_tsv(any_linespec(tpdefs))
        decoder = decode.Decoder(tpdefs, ts_tsv)
        decoder.prepare_all()
        threads = Threads()
        runner = batch.Runner(regblock, decoder.plan_for, ts_tsv, by_time=ts_tsv is not None,
                              tid_for_fs=threads.tid_for_fs, tp_map=tracepoint_map(stub, tpdefs))
        offset = 0
        if not opts["from_start"]:
            buf = status.get("buffer") or {}
            # "stream": the frame stream's bytes (qGdbtrace.frames offsets); "used" counts
            # the buffer's compact storage.
            if isinstance(buf.get("stream"), int) and isinstance(buf.get("frames"), int):
                offset, runner.next_index = buf["stream"], buf["frames"]
            else:  # count what is there from the frame headers
                counter = frames_mod.FrameCounter()
                for _off, chunk in stub.iter_stream(0):
                    counter.feed(chunk)
                offset, runner.next_index = counter.complete_bytes, counter.frames
        poller = LivePoller(opts, stub, runner, offset, ts_tsv)
        poller.discarded = (status.get("buffer") or {}).get("discarded")
        gdb.write("gdbtrace live: polling every %d ms%s; frames print as they arrive "
                  "(`gdbtrace live stop` ends it)\n" % (
                      opts["interval_ms"], "" if runner.next_index == 0 else
                      ", after the %d frames already in the buffer" % runner.next_index))
        poller.start()
