"""Trace-frame stream parsing (no gdb import: unit-testable on synthetic bytes).

The stub's qGdbtrace.frames packet returns the trace buffer as concatenated
frames in gdb's tfile layout, little endian, packed:

    u16 tracepoint number, u32 size of the blocks that follow, then blocks
    'R' + register block (the 'g' layout; 560 bytes, 816 with AVX)
    'M' + u64 address + u16 length + bytes
    'V' + u32 trace-state-variable number + i64 value

A fetch can end in the middle of a frame; `FrameParser.feed` keeps the tail
until the next chunk completes it.
"""

import struct

_HEADER = struct.Struct("<HI")
_MEM = struct.Struct("<QH")
_TSV = struct.Struct("<Iq")

FRAME_HEADER_SIZE = _HEADER.size


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


def parse_frame(body, index, tp, regblock_size):
    """Decode the blocks of one frame (BODY = the bytes after the header)."""
    regs = None
    mem = []
    tsv = None
    pos, end = 0, len(body)
    while pos < end:
        kind = body[pos]
        pos += 1
        if kind == 0x52:  # 'R'
            if end - pos < regblock_size:
                raise FrameFormatError("frame %d: truncated register block" % index)
            regs = body[pos : pos + regblock_size]
            pos += regblock_size
        elif kind == 0x4D:  # 'M'
            if end - pos < _MEM.size:
                raise FrameFormatError("frame %d: truncated memory block header" % index)
            address, length = _MEM.unpack_from(body, pos)
            pos += _MEM.size
            if end - pos < length:
                raise FrameFormatError("frame %d: truncated memory block" % index)
            mem.append((address, body[pos : pos + length]))
            pos += length
        elif kind == 0x56:  # 'V'
            if end - pos < _TSV.size:
                raise FrameFormatError("frame %d: truncated tsv block" % index)
            number, value = _TSV.unpack_from(body, pos)
            pos += _TSV.size
            if tsv is None:
                tsv = {}
            tsv[number] = value
        else:
            raise FrameFormatError("frame %d: unknown block type 0x%02x" % (index, kind))
    return Frame(index, tp, regs, mem, tsv)


class FrameParser:
    """Incremental parser: feed chunks of the stream, get complete frames."""

    def __init__(self, regblock_size, first_index=0):
        self.regblock_size = regblock_size
        self.next_index = first_index
        self._tail = b""

    def feed(self, chunk):
        data = self._tail + bytes(chunk) if self._tail else bytes(chunk)
        frames = []
        pos, end = 0, len(data)
        header = _HEADER
        while end - pos >= FRAME_HEADER_SIZE:
            tp, size = header.unpack_from(data, pos)
            if end - pos - FRAME_HEADER_SIZE < size:
                break
            body = data[pos + FRAME_HEADER_SIZE : pos + FRAME_HEADER_SIZE + size]
            frames.append(parse_frame(body, self.next_index, tp, self.regblock_size))
            self.next_index += 1
            pos += FRAME_HEADER_SIZE + size
        self._tail = data[pos:]
        return frames

    @property
    def pending_bytes(self):
        """Bytes of an incomplete frame waiting for the next chunk."""
        return len(self._tail)


class FrameCounter:
    """Counts complete frames of a stream fed in chunks, reading only headers."""

    def __init__(self):
        self.frames = 0
        self.complete_bytes = 0  # stream length up to the end of the last complete frame
        self._seen = 0
        self._header = b""
        self._body_left = None

    def feed(self, chunk):
        i, n = 0, len(chunk)
        while i < n:
            if self._body_left is None:
                take = min(FRAME_HEADER_SIZE - len(self._header), n - i)
                self._header += bytes(chunk[i : i + take])
                i += take
                if len(self._header) < FRAME_HEADER_SIZE:
                    break
                self._body_left = _HEADER.unpack(self._header)[1]
                self._header = b""
            take = min(self._body_left, n - i)
            i += take
            self._body_left -= take
            if self._body_left == 0:
                self._body_left = None
                self.frames += 1
                self.complete_bytes = self._seen + i
        self._seen += n


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
        body += b"R" + bytes(regs)
    for address, data in mem:
        body += b"M" + _MEM.pack(address, len(data)) + bytes(data)
    for number, value in tsv:
        body += b"V" + _TSV.pack(number, value)
    return _HEADER.pack(tp, len(body)) + bytes(body)
