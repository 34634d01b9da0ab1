"""Trace-frame stream parsing (no gdb import: unit-testable on synthetic bytes).

The stub's qGdbtrace.frames packet returns the trace buffer as concatenated
frames in gdb's tfile layout, little endian, packed (its one description is
gdbserver-agent/src/shared/abi/tframe.h; tests/unit/abi/abi_python_test.cc fails when
the constants below differ from it):

    u16 tracepoint number, u32 size of the blocks that follow, then blocks
    'R' + register block (the 'g' layout; 560 bytes, 816 with AVX)
    'M' + u64 address + u16 length + bytes
    'V' + u32 trace-state-variable number + i64 value

A fetch can end in the middle of a frame; `FrameSplitter` (the one walk over
frame headers) keeps the partial frame until the next chunk completes it.
"""

import re
import struct

HEADER = struct.Struct("<HI")  # u16 tracepoint, u32 size of the blocks
_MEM = struct.Struct("<QH")
_TSV = struct.Struct("<Iq")
_I64 = struct.Struct("<q")

FRAME_HEADER_SIZE = HEADER.size
BLOCK_REGS, BLOCK_MEM, BLOCK_TSV = b"R"[0], b"M"[0], b"V"[0]
MEM_BLOCK_HEADER_SIZE = 1 + _MEM.size  # tag, address, length
TSV_BLOCK_SIZE = 1 + _TSV.size  # tag, number, value
MEM_BLOCK_MAX = 0xFFFF  # bytes one 'M' block holds


class FrameFormatError(Exception):
    """The stream does not hold well-formed frames."""


class Frame:
    """One trace frame: its index in the buffer, tracepoint number and blocks."""

    __slots__ = ("index", "tp", "regs", "mem", "tsv")

    def __init__(self, index, tp, regs, mem, tsv):
        self.index = index
        self.tp = tp
        self.regs = regs  # bytes of the 'R' block, or None
        self.mem = mem  # list of (address, bytes), in block order
        self.tsv = tsv  # {tsv number: value}, or None

    def read(self, address, size):
        """SIZE bytes at ADDRESS from the frame's memory blocks, or None when
        any of them was not collected. Adjacent blocks are joined."""
        end = address + size
        for base, data in self.mem:
            if base <= address and end <= base + len(data):
                off = address - base
                return data[off : off + size]
        return self._read_spanning(address, size)

    def _read_spanning(self, address, size):
        out = bytearray()
        cursor, end = address, address + size
        progressed = True
        while cursor < end and progressed:
            progressed = False
            for base, data in self.mem:
                if base <= cursor < base + len(data):
                    take = min(end, base + len(data)) - cursor
                    out += data[cursor - base : cursor - base + take]
                    cursor += take
                    progressed = True
                    break
        return bytes(out) if cursor >= end else None

    def __repr__(self):
        return "Frame(index=%d, tp=%d, regs=%s, mem=%s, tsv=%s)" % (
            self.index,
            self.tp,
            "%d bytes" % len(self.regs) if self.regs is not None else None,
            [(hex(a), len(d)) for a, d in self.mem],
            self.tsv,
        )


class Block:
    """One block of a frame: KIND (BLOCK_REGS, BLOCK_MEM, BLOCK_TSV), HEAD (offset of its tag),
    DATA and LENGTH (where its payload is: register bytes, memory bytes, the i64 value), ADDRESS
    ('M') and TSV ('V')."""

    __slots__ = ("kind", "head", "data", "length", "address", "tsv")


_BLOCK_NAMES = {BLOCK_REGS: "register block", BLOCK_MEM: "memory block", BLOCK_TSV: "tsv block"}


def walk_blocks(buf, pos, end, regblock_size, index=0):
    """The blocks of the frame body BUF[POS:END], in order (the one block walker: Frame parsing
    and the batch decoder's layouts both use it). FrameFormatError when malformed."""
    out = []
    while pos < end:
        b = Block()
        b.kind, b.head = buf[pos], pos
        b.address = b.tsv = None
        pos += 1
        if b.kind == BLOCK_REGS:
            b.data, b.length = pos, regblock_size
        elif b.kind == BLOCK_MEM:
            if end - pos < _MEM.size:
                raise FrameFormatError("frame %d: truncated memory block header" % index)
            b.address, b.length = _MEM.unpack_from(buf, pos)
            b.data = pos + _MEM.size
        elif b.kind == BLOCK_TSV:
            b.tsv = struct.unpack_from("<I", buf, pos)[0] if end - pos >= 4 else None
            b.data, b.length = pos + 4, 8
        else:
            raise FrameFormatError("frame %d: unknown block type 0x%02x" % (index, b.kind))
        pos = b.data + b.length
        if pos > end:
            raise FrameFormatError("frame %d: truncated %s" % (index, _BLOCK_NAMES[b.kind]))
        out.append(b)
    return out


def parse_frame(body, index, tp, regblock_size):
    """Decode the blocks of one frame (BODY = the bytes after the header)."""
    regs = None
    mem = []
    tsv = None
    for b in walk_blocks(body, 0, len(body), regblock_size, index):
        if b.kind == BLOCK_REGS:
            regs = body[b.data : b.data + b.length]
        elif b.kind == BLOCK_MEM:
            mem.append((b.address, body[b.data : b.data + b.length]))
        else:
            tsv = tsv or {}
            tsv[b.tsv] = _I64.unpack_from(body, b.data)[0]
    return Frame(index, tp, regs, mem, tsv)


class FrameSplitter:
    """Splits a stream fed in chunks into frames by their headers.

    `feed` yields (tracepoint, body, end) for every frame the chunk completes,
    END being the offset in the chunk just after it. With keep_bodies=False the
    body is None and only the header of a partial frame is kept (counting a
    large stream without holding it)."""

    def __init__(self, keep_bodies=True):
        self.keep_bodies = keep_bodies
        self._header = b""
        self._tp = 0
        self._left = None  # body bytes still to come, None while reading a header
        self._body = bytearray()
        self._runs = {}  # header bytes -> compiled b"(?:HEADER.{size})+", for count()

    def feed(self, chunk):
        i, n = 0, len(chunk)
        while True:
            if self._left is None:
                take = min(FRAME_HEADER_SIZE - len(self._header), n - i)
                self._header += bytes(chunk[i : i + take])
                i += take
                if len(self._header) < FRAME_HEADER_SIZE:
                    return
                self._tp, self._left = HEADER.unpack(self._header)
                self._header = b""
            take = min(self._left, n - i)
            if self.keep_bodies:
                self._body += chunk[i : i + take]
            i += take
            self._left -= take
            if self._left:
                return
            body = bytes(self._body) if self.keep_bodies else None
            self._left = None
            self._body = bytearray()
            yield self._tp, body, i

    def count(self, chunk):
        """(frames, end): how many frames CHUNK completes and the offset in it just after the
        last one (0: none), as `feed` with keep_bodies=False would yield them, but each run of
        frames with the same header (tracepoint and size) is stepped over by one regular-
        expression match: C speed on a 1 M-frame stream, not a Python loop per frame."""
        frames = end = 0
        i, n = 0, len(chunk)
        while i < n:
            if self._left is None and not self._header and n - i >= FRAME_HEADER_SIZE:
                m = self._same_header_run(chunk, i)
                if m is not None:
                    frames += (m.end() - i) // (FRAME_HEADER_SIZE + HEADER.unpack_from(chunk, i)[1])
                    i = end = m.end()
                    continue
            # A frame begun in the previous chunk, or one this chunk does not complete: step by feed.
            if self._header:
                take = FRAME_HEADER_SIZE - len(self._header)
            elif self._left is not None:
                take = self._left
            else:
                take = n - i
            for _tp, _body, e in self.feed(chunk[i : i + take]):
                frames += 1
                end = i + e
            i += min(take, n - i)
        return frames, end

    def _same_header_run(self, chunk, i):
        header = bytes(chunk[i : i + FRAME_HEADER_SIZE])
        if len(self._runs) > 256:
            self._runs.clear()
        pattern = self._runs.get(header)
        if pattern is None:
            size = HEADER.unpack(header)[1]
            pattern = self._runs[header] = re.compile(b"(?:%s.{%d})+" % (re.escape(header), size), re.DOTALL)
        return pattern.match(chunk, i)

    @property
    def pending_bytes(self):
        """Bytes of an incomplete frame kept for the next chunk."""
        if self._left is None:
            return len(self._header)
        return FRAME_HEADER_SIZE + len(self._body)


class FrameParser:
    """Incremental parser: feed chunks of the stream, get complete frames."""

    def __init__(self, regblock_size, first_index=0):
        self.regblock_size = regblock_size
        self.next_index = first_index
        self._splitter = FrameSplitter()

    def feed(self, chunk):
        frames = []
        for tp, body, _ in self._splitter.feed(chunk):
            frames.append(parse_frame(body, self.next_index, tp, self.regblock_size))
            self.next_index += 1
        return frames

    @property
    def pending_bytes(self):
        """Bytes of an incomplete frame waiting for the next chunk."""
        return self._splitter.pending_bytes


class FrameCounter:
    """Counts complete frames of a stream fed in chunks, reading only headers."""

    def __init__(self):
        self.frames = 0
        self.complete_bytes = 0  # stream length up to the end of the last complete frame
        self._seen = 0
        self._splitter = FrameSplitter(keep_bodies=False)

    def feed(self, chunk):
        frames, end = self._splitter.count(chunk)
        if frames:
            self.frames += frames
            self.complete_bytes = self._seen + end
        self._seen += len(chunk)


def parse_stream(data, regblock_size):
    """All frames of a complete stream; error if it ends inside a frame."""
    parser = FrameParser(regblock_size)
    frames = parser.feed(data)
    if parser.pending_bytes:
        raise FrameFormatError("stream ends inside a frame (%d bytes left)" % parser.pending_bytes)
    return frames


def build_frame(tp, regs=None, mem=(), tsv=()):
    """Encode one frame (used by the unit tests and the tfile writer's checks)."""
    body = bytearray()
    if regs is not None:
        body += bytes([BLOCK_REGS]) + bytes(regs)
    for address, data in mem:
        body += bytes([BLOCK_MEM]) + _MEM.pack(address, len(data)) + bytes(data)
    for number, value in tsv:
        body += bytes([BLOCK_TSV]) + _TSV.pack(number, value)
    return HEADER.pack(tp, len(body)) + bytes(body)
