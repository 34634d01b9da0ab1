"""What every command needs from gdb: the stub connection, tracepoint
definitions, the frame stream decoded into records, thread identities."""

import os
import re
import time

import gdb

from . import batch, decode, frames, regs, relocate, tracepoints
from .transport import Stub, StubError, TfileSource, tracepoint_addresses, unescape_binary


class UserError(gdb.GdbError):
    """An error message for the user, without a Python traceback."""


def stub_errors_as_user_errors(fn):
    """Runs a command body FN: stub failures become one-line errors, not Python tracebacks."""
    try:
        return fn()
    except StubError as e:
        raise UserError("gdbtrace: %s" % e)


def current_stub():
    inferior = gdb.selected_inferior()
    conn = getattr(inferior, "connection", None)
    if conn is None:
        raise UserError("gdbtrace: not connected to a target (use `target extended-remote HOST:PORT` "
                        "with gdbtrace-server first)")
    if conn.type == "tfile":
        source = TfileSource(tfile_path())
        # A streamed file's register blocks hold only the registers every frame has, numbered first.
        tdesc = source.tdesc()
        layout = regs.tdesc_registers(tdesc, source.regblock_size) if tdesc and source.regblock_size else None
        regs.use_layout(layout)
        return source
    if not isinstance(conn, gdb.RemoteTargetConnection):
        raise UserError("gdbtrace: the current target (%s) is not a remote stub; connect to "
                        "gdbtrace-server with `target extended-remote HOST:PORT`" % conn.type)

    def send(packet):
        try:
            return conn.send_packet(packet)
        except gdb.error as e:
            msg = str(e)
            if "while the target is running" in msg:
                raise StubError("the target is running in all-stop mode, so gdb cannot talk to the stub "
                                "until it stops; use `set non-stop on` (before connecting) and "
                                "`continue &` to trace while the plugin polls")
            raise StubError("packet %s failed: %s" % (packet[:24], msg))

    stub = Stub(send)
    regs.use_layout(live_register_layout(stub))
    return stub


def live_register_layout(stub):
    """The 'R' layout of the stub's frames: None (x86-64's, regs.py) for an x86-64 program; an i386
    (gcc -m32) program's from the stub's target description, whose regnums number its blocks."""
    try:
        arch = gdb.selected_inferior().architecture().name()
    except (gdb.error, AttributeError, RuntimeError):
        return None
    if arch != "i386":
        return None
    xml, offset = b"", 0
    while True:
        reply = stub.request("qXfer:features:read:target.xml:%x,fff" % offset)
        if reply[:1] not in (b"m", b"l"):
            break
        xml += unescape_binary(reply[1:])
        offset += len(reply) - 1
        if reply[:1] == b"l":
            layout = regs.tdesc_registers(xml.decode("utf-8", "replace"), None)
            if layout:
                return layout
            break
    raise UserError("gdbtrace: cannot tell the register layout of this %s program's trace frames "
                    "(the stub's target description has no register numbers)" % arch)


def tfile_path():
    """Path of the trace file gdb has open (from `info target`)."""
    text = gdb.execute("info target", to_string=True)
    m = re.search(r"Local trace dump file:\s*`(.*)'", text)
    if not m:
        raise UserError("gdbtrace: cannot tell which trace file is open")
    return m.group(1)


def check_gdbtrace(stub):
    """The stub's status (dict); a clear error when it is not gdbtrace-server."""
    try:
        return stub.status()
    except StubError as e:
        raise UserError("gdbtrace: %s" % e)


def register_block_size(stub=None, status=None):
    """Size of the frames' 'R' blocks: a trace file says so; for the stub, 560
    or 816 bytes depending on whether the target description has the AVX halves."""
    if getattr(stub, "regblock_size", None):
        return stub.regblock_size
    if status and status.get("register_block_size"):
        return int(status["register_block_size"])
    try:
        arch = gdb.selected_inferior().architecture()
        names = {r.name for r in arch.registers()}
    except (gdb.error, AttributeError, RuntimeError):
        names = set()
    return regs.REGBLOCK_SIZE_AVX if "ymm0h" in names else regs.REGBLOCK_SIZE_NOAVX


def tracepoint_defs():
    return tracepoints.parse_info_tracepoints(gdb.execute("info tracepoints", to_string=True))


def tracepoint_map(stub, tpdefs):
    """{number in frames: gdb's tracepoint number}. They are equal for tracepoints
    gdb downloaded itself; a trace file's tracepoints get new numbers in gdb, so
    they are matched by address, else by function: a relocated PIE program's
    (`gdbtrace open`) tracepoint may sit at its function's entry in gdb, because
    gdb's trace-file target reads code only at link-time addresses and cannot
    skip the prologue, while the file holds the address after it."""
    try:
        on_target = tracepoint_addresses(stub.upload_tracepoints())
    except StubError:
        return {}
    by_address = {loc.address: n for n, t in tpdefs.items() for loc in t.locations}
    out = {}
    for number, addresses in on_target.items():
        for a in addresses:
            if a in by_address:
                out[number] = by_address[a]
                break
    unmatched = [n for n in on_target if n not in out]
    if unmatched:
        taken = set(out.values())
        by_function = {}
        for n, t in tpdefs.items():
            if n not in taken:
                for loc in t.locations:
                    by_function.setdefault(_function_start(loc.address), set()).add(n)
        for number in unmatched:
            starts = {_function_start(a) for a in on_target[number]} - {None}
            candidates = set().union(*(by_function.get(s, set()) for s in starts)) if starts else set()
            if len(candidates) == 1:
                out[number] = candidates.pop()
    if isinstance(stub, TfileSource) and len(out) < len(on_target):
        _hint_relocation(stub.path)
    return out


_hinted = set()


def _hint_relocation(path):
    """Says once per file why its tracepoints do not match gdb's when the program is a PIE."""
    program = gdb.current_progspace().filename
    if path in _hinted or not program or not relocate.is_position_independent(program):
        return
    _hinted.add(path)
    gdb.write("gdbtrace: %s's tracepoints are not at %s's link-time addresses: the program is "
              "position-independent and gdb's `target tfile` does not relocate it; open the file "
              "with `gdbtrace open %s`\n" % (path, program, path), gdb.STDERR)


def _function_start(address):
    """Start of the function holding ADDRESS in gdb's symbols, or None."""
    try:
        block = gdb.block_for_pc(address)
    except (RuntimeError, gdb.error):
        return None
    while block is not None and block.function is None:
        block = block.superblock
    return block.start if block is not None else None


def iter_frames(stub, regblock_size, first_offset=0, tp_map=None):
    """Every frame in the buffer, streamed chunk by chunk (bulk, no tfind)."""
    parser = frames.FrameParser(regblock_size)
    remap = tp_map and any(k != v for k, v in tp_map.items())
    for _offset, chunk in stub.iter_stream(first_offset):
        for f in parser.feed(chunk):
            if remap:
                f.tp = tp_map.get(f.tp, f.tp)
            yield f
    if parser.pending_bytes:
        raise StubError("the frame stream ends inside a frame (%d bytes left over)" % parser.pending_bytes)


def any_linespec(tpdefs):
    """Some tracepoint's source location (to compile location-independent expressions at)."""
    loc = next((loc for t in tpdefs.values() for loc in t.locations), None)
    return decode.linespec_of(loc) if loc is not None else None


class Threads:
    """Thread identity of a frame: the thread's TLS base (fs_base, unique per
    thread) from the 'R' block, mapped to the LWP of a live thread with that
    fs_base, else numbered in order of appearance (thread gone)."""

    def __init__(self):
        self.by_fs_base = {}
        self.names = {}
        self._ordinals = {}
        self._learn_live_threads()

    def _learn_live_threads(self):
        try:
            if int(gdb.parse_and_eval("$trace_frame")) >= 0:
                return  # registers would be the trace frame's, not the threads'
        except (gdb.error, ValueError):
            pass
        inferior = gdb.selected_inferior()
        try:
            selected = gdb.selected_thread()
        except gdb.error:
            selected = None
        for thread in inferior.threads():
            try:
                if not thread.is_stopped():
                    continue
                thread.switch()
                fs = int(gdb.parse_and_eval("$fs_base")) & ((1 << 64) - 1)
            except (gdb.error, ValueError):
                continue
            if fs:
                lwp = thread.ptid[1] or thread.ptid[0]
                self.by_fs_base[fs] = lwp
                self.names[lwp] = thread.name or "thread %d" % thread.num
        if selected is not None and selected.is_valid():
            try:
                selected.switch()
            except gdb.error:
                pass

    def tid_for_fs(self, fs):
        if not fs:
            return None
        tid = self.by_fs_base.get(fs)
        if tid is None:
            tid = self._ordinals.get(fs)
            if tid is None:
                tid = self._ordinals[fs] = len(self._ordinals) + 1
                self.names[tid] = "thread #%d (gone; fs_base 0x%x)" % (tid, fs)
        return tid


class TraceData:
    """Decoded records from the stub's buffer, for exports and statistics."""

    def __init__(self, exprs=None, need_threads=True, report=True):
        self.stub = current_stub()
        self.status = check_gdbtrace(self.stub)
        self.regblock_size = register_block_size(self.stub, self.status)
        self.tpdefs = tracepoint_defs()
        self.tp_map = tracepoint_map(self.stub, self.tpdefs)
        self.ts_tsv = decode.timestamp_tsv(any_linespec(self.tpdefs))
        self.threads = Threads() if need_threads else None
        self.decoder = decode.Decoder(self.tpdefs, self.ts_tsv, extra_exprs=exprs)
        self.timestamps = "trace_timestamp" if self._all_collect_timestamp() else "order"
        self.problems_reported = set()
        self.report = report  # print decoding problems as they appear (stats reports them only on failure)

    def _all_collect_timestamp(self):
        if self.ts_tsv is None or not self.tpdefs:
            return False
        return all("$trace_timestamp" in t.collect for t in self.tpdefs.values())

    @property
    def timestamps_note(self):
        if self.timestamps == "trace_timestamp":
            return "ts = $trace_timestamp (microseconds, collected at each hit)"
        return ("ts = frame index (order in the trace buffer): not every tracepoint collects "
                "$trace_timestamp")

    def label(self, tp):
        t = self.tpdefs.get(tp)
        return t.label() if t else "tp %d" % tp

    def frames(self):
        return iter_frames(self.stub, self.regblock_size, tp_map=self.tp_map)

    def report_problems(self, plan):
        if not self.report:
            return
        for expr, message in plan.problems:
            key = (plan.tp, expr)
            if key not in self.problems_reported:
                self.problems_reported.add(key)
                gdb.write("gdbtrace: tracepoint %d: cannot decode `%s`: %s\n" % (plan.tp, expr, message),
                          gdb.STDERR)

    def runs(self, fast=True, markers=False):
        """Runs (batch.Run) of decoded frames, streamed from the stub chunk by chunk. Loss markers
        of a streamed file (batch.Marker) are collected in self.markers, and yielded too when
        MARKERS."""
        runner = batch.Runner(self.regblock_size, self.decoder.plan_for, self.ts_tsv,
                              by_time=self.timestamps == "trace_timestamp",
                              tid_for_fs=self.threads.tid_for_fs if self.threads is not None else None,
                              tp_map=self.tp_map, fast=fast,
                              marker_tsv=batch.drop_marker_tsv(self.stub.upload_tsvs()))
        self.runner = runner
        self.markers = []
        reported = set()
        for _offset, chunk in self.stub.iter_stream(0):
            for run in runner.feed(chunk):
                if isinstance(run, batch.Marker):
                    self.markers.append(run)
                    if markers:
                        yield run
                    continue
                if run.plan.problems and id(run.plan) not in reported:
                    reported.add(id(run.plan))
                    self.report_problems(run.plan)
                yield run
        if runner.pending_bytes:
            raise StubError("the frame stream ends inside a frame (%d bytes left over)" % runner.pending_bytes)
        before = (self.status.get("buffer") or {}).get("discarded")
        if before is not None and self.status.get("running"):
            after = (self.stub.status().get("buffer") or {}).get("discarded")
            if after != before:
                raise StubError("the circular trace buffer discarded frames while they were being read, so "
                                "the result would mix two states of the buffer; `tstop` first, then try again")

    def markers_note(self):
        """One line on the frames a streamed trace lost (its loss markers), or ""."""
        markers = getattr(self, "markers", [])
        if not markers:
            return ""
        by_tp = {}
        for m in markers:
            by_tp[m.tp] = by_tp.get(m.tp, 0) + m.dropped
        return ("the trace lost %d frames (full kernel rings) at %d places, first after frame %d: %s" % (
            sum(by_tp.values()), len(markers), markers[0].index - 1,
            ", ".join("%d of %s" % (n, self.label(tp)) for tp, n in sorted(by_tp.items()))))

    def columns(self):
        """Union of the column names of every tracepoint's main plan (CSV header)."""
        names = []
        for tp in sorted(self.tpdefs):
            t = self.tpdefs[tp]
            if not t.locations:
                continue
            plan = self.decoder.main_plan(tp)
            self.report_problems(plan)
            for n in plan.names:
                if n not in names:
                    names.append(n)
        return names

    def pid(self):
        try:
            return gdb.selected_inferior().pid or None
        except gdb.error:
            return None


def program_name():
    try:
        name = gdb.current_progspace().filename
    except (gdb.error, AttributeError):
        name = None
    return os.path.basename(name) if name else ""


def now():
    return time.monotonic()
