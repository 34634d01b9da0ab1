"""Decoding runs of frames at C speed (no gdb import).

Frames of one tracepoint usually have the same shape: the same blocks, in the
same order, with the same lengths, the globals at the same addresses, the locals
at the same distance from the frame's registers. For such a shape (a Layout,
learned from one reference frame and its Plan) every leaf value sits at a fixed
offset of the frame, so a whole run of consecutive frames of that shape is:
  * found with one regular-expression match over the raw stream (the fixed
    bytes: header, block kinds and lengths, global addresses, tsv numbers, the
    pc; everything else is a wildcard),
  * unpacked into one flat list of values (frame after frame) by a Struct of
    BULK frames, one C call per BULK frames,
  * checked for the register-relative locals (block address - base register
    must equal what the plan's bytecode says) with C-level map/count operations,
  * cut into columns by slicing (values[j::fields]), never a Python loop or a
    tuple per frame.
A frame that fits no layout goes through the general path (parse the frame,
run the plan's bytecode, read its memory blocks) and may teach a new layout.

Rows are tuples (frame index, ts, tid, value...) in the plan's leaf order; fast
runs hold them as columns (one sequence per row position) until asked for rows.
"""

import itertools
import operator
import re
import struct

from . import frames as frames_mod
from . import regs as regs_mod

_HEADER = frames_mod.HEADER
_HDR = frames_mod.FRAME_HEADER_SIZE
_REGS, _MEM, _TSV = frames_mod.BLOCK_REGS, frames_mod.BLOCK_MEM, frames_mod.BLOCK_TSV
MAX_LAYOUTS_PER_SHAPE = 8
BULK = 1024  # frames per Struct.unpack_from call on long runs


class Layout:
    __slots__ = ("plan", "size", "struct", "bulk", "fields", "pattern", "leaf_idx", "ts_idx", "fs_idx", "checks",
                 "str_leaves")

    def __repr__(self):
        return "Layout(tp=%d, size=%d, fields=%d, checks=%d)" % (
            self.plan.tp, self.size, len(self.struct.format), len(self.checks))


def _blocks(frame, regblock_size):
    """Blocks of one complete frame with their offsets in FRAME (header included)."""
    return frames_mod.walk_blocks(frame, _HDR, len(frame), regblock_size)


class _Builder:
    """Collects struct fields and fixed byte ranges for one layout."""

    def __init__(self, frame):
        self.frame = frame
        self.fields = {}  # offset -> (code, size)
        self.fixed = []  # (start, end) byte ranges that must match the reference frame

    def field(self, offset, code):
        size = struct.calcsize("<" + code)
        have = self.fields.get(offset)
        if have is not None:
            if have[0] != code:
                raise _NotFast("two leaves read offset %d differently" % offset)
            return
        self.fields[offset] = (code, size)

    def fix(self, start, length):
        self.fixed.append((start, start + length))

    def compile(self):
        offsets = sorted(self.fields)
        fmt, cursor, index = ["<"], 0, {}
        for off in offsets:
            code, size = self.fields[off]
            if off < cursor:
                raise _NotFast("overlapping leaves at offset %d" % off)
            if off > cursor:
                fmt.append("%dx" % (off - cursor))
            fmt.append(code)
            index[off] = len(index)
            cursor = off + size
        if cursor < len(self.frame):
            fmt.append("%dx" % (len(self.frame) - cursor))
        st = struct.Struct("".join(fmt))
        pattern, cursor = [], 0
        for start, end in sorted(self.fixed):
            if end <= cursor:
                continue
            start = max(start, cursor)
            if start > cursor:
                pattern.append(b".{%d}" % (start - cursor))
            pattern.append(re.escape(bytes(self.frame[start:end])))
            cursor = end
        if cursor < len(self.frame):
            pattern.append(b".{%d}" % (len(self.frame) - cursor))
        run = re.compile(b"(?:" + b"".join(pattern) + b")+", re.DOTALL)
        return st, run, index


class _NotFast(Exception):
    pass


def _register_read(program, leaf):
    """(register number, struct code) when PROGRAM only reads one integer register and the code
    unpacks from the 'R' block exactly what the general path gives (leaf.from_int of the program's
    result); else None. Covers `$rax` (8 bytes) and `$eflags`, `$cs` (4 bytes, then zero_ext/ext 32)."""
    ops = [op for op in program.ops if op.name != "trace_quick"]
    if len(ops) < 2 or ops[0].name != "reg" or ops[-1].name != "end" or len(ops) > 3:
        return None
    regno = ops[0].arg
    size = regs_mod.reg_size(regno)
    fmt = leaf.fmt or "<q"
    code = fmt[1:]
    if size not in (4, 8) or struct.calcsize(fmt) != size or code not in ("i", "I", "q", "Q"):
        return None
    extend = ops[1] if len(ops) == 3 else None
    if extend is not None and (extend.name not in ("ext", "zero_ext") or extend.arg != 8 * size):
        return None
    if code.islower():  # signed: from_int sign-converts to the leaf's size whatever the extension
        return (regno, code) if leaf.kind in ("int", "enum") else None
    # unsigned: the program's result as is, which a sign extension would change below 64 bits
    return (regno, code) if extend is None or extend.name == "zero_ext" or size == 8 else None


def _program_tsv(program):
    ops = program.ops
    if len(ops) == 2 and ops[0].name == "getv" and ops[1].name == "end":
        return ops[0].arg
    return None


def build_layout(plan, frame, regblock_size, ts_tsv=None, want_fs=False):
    """Layout of FRAME (the complete frame bytes) for PLAN, or None when some
    leaf's place is not fixed by the frame's shape (then frames go the general way)."""
    try:
        return _build_layout(plan, bytes(frame), regblock_size, ts_tsv, want_fs)
    except (_NotFast, frames_mod.FrameFormatError, struct.error):
        return None


def _build_layout(plan, frame, regblock_size, ts_tsv, want_fs):
    blocks = _blocks(frame, regblock_size)
    b = _Builder(frame)
    b.fix(0, _HDR)
    regs_block = None
    for blk in blocks:
        b.fix(blk.head, 1)
        if blk.kind == _MEM:
            b.fix(blk.head + 9, 2)  # length
        elif blk.kind == _TSV:
            b.fix(blk.head + 1, 4)  # tsv number
        elif blk.kind == _REGS:
            regs_block = blk
    if regs_block is not None and plan.address is not None:
        rip_off = regs_block.data + regs_mod.OFFSETS[regs_mod.RIP]
        if struct.unpack_from("<Q", frame, rip_off)[0] == plan.address:
            b.fix(rip_off, 8)

    leaf_fields = []  # (offset, code) per leaf
    str_leaves = []
    checks = []  # (block address offset, register offset)
    for column in plan.columns:
        program = column.program
        if column.mode == "value":
            leaf = column.leaves[0]
            read = _register_read(program, leaf)
            if read is not None:
                if regs_block is None:
                    raise _NotFast("registers not collected")
                off = regs_block.data + regs_mod.OFFSETS[read[0]]
                b.field(off, read[1])
                leaf_fields.append((off, read[1]))
                continue
            if program.kind == "reg":
                raise _NotFast("register expression with an offset")
            tsv = _program_tsv(program)
            vblk = next((x for x in blocks if x.kind == _TSV and x.tsv == tsv), None) if tsv is not None else None
            if vblk is None or (leaf.fmt or "<q") != "<q":
                raise _NotFast("value computed by bytecode")
            b.field(vblk.data, "q")
            leaf_fields.append((vblk.data, "q"))
            continue
        # 'mem' column: where is it in this frame?
        if program.kind == "const":
            address = program.const
            base_off = None
        elif program.kind == "reg":
            if regs_block is None:
                raise _NotFast("registers not collected")
            base_off = regs_block.data + regs_mod.OFFSETS[program.regno]
            address = (struct.unpack_from("<Q", frame, base_off)[0] + program.const) & ax_mask
        else:
            raise _NotFast("address computed by a general program")
        mblk = next((x for x in blocks if x.kind == _MEM and x.address <= address
                     and address + column.size <= x.address + x.length), None)
        if mblk is None:
            raise _NotFast("not collected in the reference frame")
        if base_off is None:
            b.fix(mblk.head + 1, 8)
        else:
            b.field(mblk.head + 1, "Q")
            b.field(base_off, "Q")
            checks.append((mblk.head + 1, base_off))
        start = mblk.data + (address - mblk.address)
        for leaf in column.leaves:
            if leaf.kind == "str":
                code = "%ds" % leaf.size
                str_leaves.append(len(leaf_fields))
            elif leaf.fmt:
                code = leaf.fmt[1:]
            else:
                raise _NotFast("leaf %s needs gdb to format" % leaf.name)
            b.field(start + leaf.offset, code)
            leaf_fields.append((start + leaf.offset, code))

    ts_off = fs_off = None
    if ts_tsv is not None:
        vblk = next((x for x in blocks if x.kind == _TSV and x.tsv == ts_tsv), None)
        if vblk is not None:
            ts_off = vblk.data
            b.field(ts_off, "q")
    if want_fs and regs_block is not None:
        fs_off = regs_block.data + regs_mod.OFFSETS[regs_mod.FS_BASE]
        b.field(fs_off, "Q")

    st, pattern, index = b.compile()
    layout = Layout()
    layout.plan = plan
    layout.size = len(frame)
    layout.struct = st
    layout.bulk = None  # the Struct of BULK frames, made for the first run that long
    layout.pattern = pattern
    layout.leaf_idx = [index[off] for off, _code in leaf_fields]
    layout.ts_idx = index[ts_off] if ts_off is not None else None
    layout.fs_idx = index[fs_off] if fs_off is not None else None
    ref = st.unpack(frame)
    layout.fields = len(ref)
    layout.checks = [(index[a], index[r], ref[index[a]] - ref[index[r]]) for a, r in checks]
    layout.str_leaves = str_leaves
    return layout


ax_mask = (1 << 64) - 1


def _unpack_run(layout, buf, pos, n):
    """The struct fields of N frames of LAYOUT from POS, in one flat list (frame after frame):
    BULK frames per call of a Struct repeating the frame's format, the rest frame by frame."""
    values = []
    if n >= BULK:
        if layout.bulk is None:
            layout.bulk = struct.Struct("<" + layout.struct.format.lstrip("<") * BULK)
        step = layout.bulk.size
        for start in range(pos, pos + (n // BULK) * step, step):
            values += layout.bulk.unpack_from(buf, start)
        pos += (n // BULK) * step
    rest = n % BULK
    if rest:
        tail = memoryview(buf)[pos : pos + rest * layout.size]
        values += itertools.chain.from_iterable(layout.struct.iter_unpack(tail))
    return values


class Run:
    """Consecutive frames decoded with one plan: rows (index, ts, tid, values...).
    clean: every value is present and of a scalar leaf kind (exporters may
    format the run with one template). The fast path gives COLUMNS instead of
    rows (position k of every row, one sequence each); each form is made from
    the other on first use."""

    __slots__ = ("plan", "clean", "has_tid", "_rows", "_columns")

    def __init__(self, plan, rows, clean, has_tid, columns=None):
        self.plan, self.clean, self.has_tid = plan, clean, has_tid
        self._rows, self._columns = rows, columns

    def __len__(self):
        return len(self._rows) if self._rows is not None else len(self._columns[0])

    @property
    def rows(self):
        if self._rows is None:
            self._rows = list(zip(*self._columns))
        return self._rows

    @property
    def columns(self):
        if self._columns is None:
            width = 3 + len(self.plan.leaves)
            self._columns = list(zip(*self._rows)) if self._rows else [()] * width
        return self._columns


class Marker:
    """A loss marker of a streamed trace (docs/streaming.md): frame INDEX of the file holds no
    values but says that tracepoint TP lost DROPPED frames there (its ring was full)."""

    __slots__ = ("index", "tp", "dropped")

    def __init__(self, index, tp, dropped):
        self.index, self.tp, self.dropped = index, tp, dropped

    def __repr__(self):
        return "Marker(frame %d, tp %d, dropped %d)" % (self.index, self.tp, self.dropped)


# The trace state variable a loss marker holds (trace/trace_stream.h), by its name in the file's header.
DROP_MARKER_TSV_NAME = "gdbtrace_dropped"


def drop_marker_tsv(tsv_lines):
    """The number of the loss markers' variable among qTfV/tfile `tsv` lines, or None."""
    for line in tsv_lines:
        parts = line.split(":")
        if len(parts) >= 4:
            try:
                if bytes.fromhex(parts[3]).decode("latin-1") == DROP_MARKER_TSV_NAME:
                    return int(parts[0], 16)
            except ValueError:
                continue
    return None


def _bytes_to_str(v):
    return v.split(b"\0", 1)[0].decode("utf-8", "replace")


class Runner:
    """Turns chunks of the frame stream into Runs.

    plan_for(frame) -> Plan (built with gdb on first use; frame.tp already mapped);
    tid_for_fs(fs_base) -> thread id or None; tp_map maps numbers in frames to gdb's."""

    def __init__(self, regblock_size, plan_for, ts_tsv=None, by_time=False, tid_for_fs=None, tp_map=None,
                 fast=True, marker_tsv=None):
        self.regblock_size = regblock_size
        self.marker_tsv = marker_tsv  # loss markers hold this TSV alone (None: the trace has none)
        self.plan_for = plan_for
        self.ts_tsv = ts_tsv
        self.by_time = by_time
        self.tid_for_fs = tid_for_fs
        self.tp_map = tp_map or {}
        self.fast = fast
        self.next_index = 0
        self.frames_fast = 0
        self.frames_slow = 0
        self._tail = b""
        self._layouts = {}  # (tp in frame, size) -> [Layout]
        self._no_layout = {}  # (tp, size) -> number of failed attempts

    def feed(self, chunk):
        buf = self._tail + bytes(chunk) if self._tail else bytes(chunk)
        runs = []
        pos, end = 0, len(buf)
        while end - pos >= _HDR:
            tp, size = _HEADER.unpack_from(buf, pos)
            if end - pos - _HDR < size:
                break
            frame_end = pos + _HDR + size
            run = self._fast_run(buf, pos, tp, size) if self.fast else None
            if run is None:
                run = self._slow_frame(buf, pos, frame_end, tp, size)
                pos = frame_end
            else:
                pos += len(run) * (_HDR + size)
            runs.append(run)
        self._tail = buf[pos:]
        return runs

    @property
    def pending_bytes(self):
        return len(self._tail)

    def reset(self, next_index):
        """Forget a partial frame (the stream is picked up elsewhere) and number on from NEXT_INDEX."""
        self._tail = b""
        self.next_index = next_index

    def _fast_run(self, buf, pos, tp, size):
        key = (tp, size)
        for layout in self._layouts.get(key, ()):
            run = self._match(layout, buf, pos)
            if run is not None:
                return run
        return None

    def _match(self, layout, buf, pos):
        m = layout.pattern.match(buf, pos)
        if m is None:
            return None
        n = (m.end() - pos) // layout.size
        values = _unpack_run(layout, buf, pos, n)
        f = layout.fields
        for ai, ri, delta in layout.checks:
            diffs = list(map(operator.sub, values[ai::f], values[ri::f]))
            if diffs.count(delta) != n:
                n = next(i for i, d in enumerate(diffs) if d != delta)  # the frames before the first miss
                if n == 0:
                    return None
                del values[n * f :]  # the remaining checks see only the frames kept
        i0 = self.next_index
        self.next_index += n
        self.frames_fast += n
        sliced = {}

        def column(j):  # field J of every frame; ts and a leaf may share one field
            c = sliced.get(j)
            if c is None:
                c = sliced[j] = values[j::f]
            return c

        index = range(i0, i0 + n)
        ts = index
        if self.by_time:
            ts = column(layout.ts_idx) if layout.ts_idx is not None else [None] * n
        has_tid = False
        tid = [None] * n
        if layout.fs_idx is not None and self.tid_for_fs is not None:
            fs = column(layout.fs_idx)
            mapping = {x: self.tid_for_fs(x) for x in set(fs)}
            has_tid = None not in mapping.values()
            tid = list(map(mapping.__getitem__, fs))
        leaves = [column(j) for j in layout.leaf_idx]
        for k in layout.str_leaves:
            leaves[k] = list(map(_bytes_to_str, leaves[k]))
        clean = (layout.ts_idx is not None or not self.by_time) and all(
            leaf.kind in ("int", "ptr", "float", "str") for leaf in layout.plan.leaves)
        return Run(layout.plan, None, clean, has_tid, columns=[index, ts, tid] + leaves)

    def _slow_frame(self, buf, pos, frame_end, tp, size):
        index = self.next_index
        self.next_index += 1
        self.frames_slow += 1
        frame = frames_mod.parse_frame(memoryview(buf)[pos + _HDR : frame_end], index, self.tp_map.get(tp, tp),
                                       self.regblock_size)
        if (self.marker_tsv is not None and frame.regs is None and not frame.mem and frame.tsv
                and list(frame.tsv) == [self.marker_tsv]):
            return Marker(index, frame.tp, frame.tsv[self.marker_tsv])
        plan = self.plan_for(frame)
        if self.fast:
            self._learn(plan, buf[pos:frame_end], tp, size)
        values = plan.decode(frame)
        ts = index
        if self.by_time:
            ts = frame.tsv.get(self.ts_tsv) if frame.tsv else None
        tid = None
        if frame.regs is not None and self.tid_for_fs is not None:
            tid = self.tid_for_fs(regs_mod.read_int(frame.regs, regs_mod.FS_BASE))
        return Run(plan, [(index, ts, tid) + tuple(values)], False, tid is not None)

    def _learn(self, plan, frame_bytes, tp, size):
        key = (tp, size)
        tries = self._no_layout.get(key, 0)
        layouts = self._layouts.setdefault(key, [])
        if tries >= MAX_LAYOUTS_PER_SHAPE or len(layouts) >= MAX_LAYOUTS_PER_SHAPE:
            return
        layout = build_layout(plan, frame_bytes, self.regblock_size, self.ts_tsv, self.tid_for_fs is not None)
        if layout is None:
            self._no_layout[key] = tries + 1
        else:
            layouts.append(layout)
