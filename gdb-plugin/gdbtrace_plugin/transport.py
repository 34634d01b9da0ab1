"""The stub's packets, as the plugin sends them (no gdb import: `send` is any
callable taking the packet bytes and returning the reply bytes, or None for an
empty reply -- exactly what gdb.RemoteTargetConnection.send_packet does).

  qGdbtrace.status          -> hex-encoded JSON
  qGdbtrace.frames:OFF,LEN  -> 'm' | 'l' + frame-stream bytes from byte OFF (hex numbers),
                               binary-escaped; 'l' marks the last chunk
  qGdbtrace.frames.file:OFF;HEXPATH -> 'F<n>': the stream from OFF written into the empty file
                               PATH this plugin made (same host only); else E.<why> and the
                               plugin falls back to qGdbtrace.frames
  qGdbtrace.save.file:HEXPATH -> 'OK': what `tsave -r` writes (the stub's tfile writer) put into
                               the empty file PATH this plugin made (same host only); else E.<why>
  qGdbtrace.stacks:FIRST,COUNT -> 'm' | 'l' + one text line per trace frame from frame FIRST
                               (at most COUNT), binary-escaped; 'l': the last frame is in it
                               (line format: stacks.py)
  qTStatus, qTfP/qTsP, qTfV/qTsV, qTP  (standard; used for the tfile header)
"""

import binascii
import json
import os
import tempfile

NOT_GDBTRACE = (
    "the remote stub does not answer qGdbtrace.* packets: the gdbtrace plugin needs "
    "gdbtrace-server (stock gdbserver has no bulk trace access)"
)


def unescape_binary(data):
    """Undo the RSP binary escaping ('}' then the byte xor 0x20 for '#', '$', '}', '*').

    gdb's send_packet expands run-length encoding but leaves escapes in place.
    Every '}' of escaped data starts an escape, and the escaped bytes are not
    '}', so four replacements do it at C speed; '}]' -> '}' goes last so that
    no '}' it produces is taken for the start of another escape."""
    if b"}" not in data:
        return data
    if data.endswith(b"}"):
        raise StubError("binary reply ends inside an escape")
    return (data.replace(b"}\x03", b"#").replace(b"}\x04", b"$").replace(b"}\x0a", b"*")
            .replace(b"}]", b"}"))


def _file_chunks(fd, start, size, first_offset, chunk, what, close=False):
    """(offset, bytes) chunks of SIZE bytes of FD from byte START, CHUNK bytes at a time (bounded
    memory however large the file); offsets count from FIRST_OFFSET."""
    try:
        done = 0
        while done < size:
            data = os.pread(fd, min(chunk, size - done), start + done)
            if not data:
                raise StubError("%s: the file holds %d of %d bytes" % (what, done, size))
            yield first_offset + done, data
            done += len(data)
    finally:
        if close:
            os.close(fd)


class StubError(Exception):
    """The stub refused or could not answer (message is for the user)."""


class Stub:
    # Bytes asked for per qGdbtrace.frames packet. The stub answers at most its own chunk size
    # (64 KiB today); asking for more lets a larger stub limit cut round trips without a change here.
    CHUNK = 1 << 20

    def __init__(self, send):
        self._send = send

    def request(self, packet):
        if isinstance(packet, str):
            packet = packet.encode("ascii")
        reply = self._send(packet)
        return b"" if reply is None else bytes(reply)

    @staticmethod
    def _error_text(reply):
        """The text of an 'E.text' / 'Enn' error reply, else None."""
        if reply.startswith(b"E.") :
            return reply[2:].decode("utf-8", "replace")
        if len(reply) == 3 and reply[:1] == b"E" and all(c in b"0123456789abcdefABCDEF" for c in reply[1:]):
            return "error " + reply[1:].decode()
        return None

    # --- gdbtrace packets ---

    def status(self):
        reply = self.request("qGdbtrace.status")
        if not reply:
            raise StubError(NOT_GDBTRACE)
        err = self._error_text(reply)
        if err is not None:
            raise StubError("qGdbtrace.status failed: " + err)
        try:
            return json.loads(binascii.unhexlify(reply).decode("utf-8"))
        except (binascii.Error, ValueError) as e:
            raise StubError("qGdbtrace.status: malformed reply (%s): %r" % (e, reply[:80]))

    def frames_chunk(self, offset, length=None):
        """(bytes, last) from byte OFFSET of the frame stream."""
        length = length or self.CHUNK
        reply = self.request("qGdbtrace.frames:%x,%x" % (offset, length))
        if not reply:
            raise StubError(NOT_GDBTRACE)
        err = self._error_text(reply)
        if err is not None:
            raise StubError("qGdbtrace.frames failed: " + err)
        kind = reply[:1]
        if kind not in (b"m", b"l"):
            raise StubError("qGdbtrace.frames: unexpected reply %r" % reply[:40])
        return unescape_binary(reply[1:]), kind == b"l"

    # Chunks handed on from a local file (bounded memory for the decoder's rows).
    LOCAL_CHUNK = 4 << 20
    # None: not tried yet; False: the stub is on another host (or refuses): packets only.
    _local_ok = None

    def frames_local(self, offset):
        """The frame stream from OFFSET as an iterator of (offset, bytes) chunks read from a file
        on this host (qGdbtrace.frames.file), or None when the stub cannot write one here (another
        host, another user, an older stub). One write by the stub and chunked reads here instead of
        1 MiB packets through gdb; the file is unlinked at once and read LOCAL_CHUNK at a time, so
        a large buffer is never in memory whole."""
        if self._local_ok is False:
            return None
        directory = "/dev/shm" if os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()
        fd, path = tempfile.mkstemp(prefix="gdbtrace-frames-", dir=directory)
        try:
            reply = self.request("qGdbtrace.frames.file:%x;%s" % (offset, binascii.hexlify(path.encode()).decode()))
        except BaseException:
            os.close(fd)
            raise
        finally:
            os.unlink(path)
        if not reply.startswith(b"F"):
            os.close(fd)
            self._local_ok = False
            return None
        self._local_ok = True
        return _file_chunks(fd, 0, int(reply[1:], 16), offset, self.LOCAL_CHUNK,
                            "qGdbtrace.frames.file", close=True)

    def iter_stream(self, offset=0, length=None):
        """Yields (offset, bytes) chunks from OFFSET to the current end of the buffer."""
        local = self.frames_local(offset) if length is None else None
        if local is not None:
            yield from local
            return
        while True:
            data, last = self.frames_chunk(offset, length)
            if data:
                yield offset, data
                offset += len(data)
            if last or not data:
                return

    def stacks_chunk(self, first, count=1 << 20):
        """(lines, last): the unwound stacks of trace frames FIRST.. as text lines."""
        reply = self.request("qGdbtrace.stacks:%x,%x" % (first, count))
        if not reply:
            raise StubError("the stub does not answer qGdbtrace.stacks (an older gdbtrace-server?)")
        err = self._error_text(reply)
        if err is not None:
            raise StubError("qGdbtrace.stacks failed: " + err)
        kind = reply[:1]
        if kind not in (b"m", b"l"):
            raise StubError("qGdbtrace.stacks: unexpected reply %r" % reply[:40])
        text = unescape_binary(reply[1:]).decode("utf-8", "replace")
        return [l for l in text.split("\n") if l], kind == b"l"

    def iter_stacks(self):
        """Every frame's stack lines (S and F lines, see stacks.py), oldest frame first."""
        first = 0
        while True:
            lines, last = self.stacks_chunk(first)
            yield from lines
            frames = sum(1 for l in lines if l.startswith("F"))
            first += frames
            if last or not frames:
                return

    def save_file(self, path):
        """Fills PATH, an empty file this plugin made, with the trace as the stub's `tsave -r`
        writes it (registers no frame holds stay <unavailable> when read back). False when the
        stub cannot (another host, an older stub): the caller writes the file itself."""
        reply = self.request("qGdbtrace.save.file:%s" % binascii.hexlify(os.path.abspath(path).encode()).decode())
        return reply == b"OK"

    # --- standard tracepoint packets ---

    def trace_status(self):
        """qTStatus as (running: bool, fields: dict, raw reply text without the 'T')."""
        reply = self.request("qTStatus").decode("ascii", "replace")
        if not reply.startswith("T"):
            raise StubError("qTStatus: unexpected reply %r" % reply[:80])
        body = reply[1:]
        parts = body.split(";")
        fields = {}
        for part in parts[1:]:
            key, _, value = part.partition(":")
            fields[key] = value
        return parts[0] == "1", fields, body

    def _upload(self, first, next_):
        items = []
        reply = self.request(first).decode("ascii", "replace")
        while reply and reply != "l":
            err = self._error_text(reply.encode())
            if err is not None:
                raise StubError("%s failed: %s" % (first, err))
            items.append(reply)
            reply = self.request(next_).decode("ascii", "replace")
        return items

    def upload_tracepoints(self):
        """qTfP/qTsP lines: 'T<n>:<addr>:...', 'A...', 'S...', 'Z...'."""
        return self._upload("qTfP", "qTsP")

    def upload_tsvs(self):
        """qTfV/qTsV lines: '<n>:<initial>:<builtin>:<hex name>'."""
        return self._upload("qTfV", "qTsV")

    def tracepoint_usage(self, number, address):
        """qTP reply 'V<hits>:<bytes>' for one tracepoint location, or None."""
        reply = self.request("qTP:%x:%x" % (number, address)).decode("ascii", "replace")
        return reply if reply.startswith("V") else None


class TfileSource(Stub):
    """The same interface over a trace file gdb has open (`target tfile FILE`):
    its frame section is the same frame stream, so exports and statistics of
    saved traces work too. The file is read in chunks, never whole: a streamed
    trace (`monitor gdbtrace stream`) may be many times larger than memory."""

    CHUNK = 4 << 20  # bytes per read of the frame section
    HEADER_LIMIT = 64 << 20  # a header larger than this is not a trace file's

    def __init__(self, path):
        super().__init__(None)
        self._local_ok = False  # the file is read directly
        self.path = path
        self._file = open(path, "rb")
        fd = self._file.fileno()
        size = os.fstat(fd).st_size
        header, self._frames_start = self._read_header(fd)
        self.header_lines = header.decode("latin-1").splitlines()
        self.regblock_size = None
        self.status_body = ""
        self.tsv_lines, self.tp_lines, self.tdesc_lines = [], [], []
        for line in self.header_lines:
            if line.startswith("R "):
                self.regblock_size = int(line[2:], 16)
            elif line.startswith("status "):
                self.status_body = line[7:]
            elif line.startswith("tsv "):
                self.tsv_lines.append(line[4:])
            elif line.startswith("tp "):
                self.tp_lines.append(line[3:])
            elif line.startswith("tdesc "):
                self.tdesc_lines.append(line[6:])
        self._stream_end = self._find_stream_end(fd, size - self._frames_start)

    def close(self):
        self._file.close()

    def __del__(self):
        if hasattr(self, "_file"):
            self._file.close()

    def _read_header(self, fd):
        """(header bytes without the magic, offset of the first frame), read 64 KiB at a time."""
        magic = b"\x7fTRACE0\n"
        if os.pread(fd, len(magic), 0) != magic:
            raise StubError("%s is not a gdb trace file" % self.path)
        data = magic
        while True:
            end = data.find(b"\n\n", len(magic))
            if end >= 0:
                return data[len(magic) : end], end + 2
            more = os.pread(fd, 1 << 16, len(data))
            if not more or len(data) > self.HEADER_LIMIT:
                raise StubError("%s: trace file header does not end" % self.path)
            data += more

    def _find_stream_end(self, fd, size):
        """Frames run until a header with tracepoint number 0 (gdb's end marker). A file that was
        ended (gdb's tsave, or a stream the stub closed: status not running) ends with exactly
        those 4 zero bytes. A stream whose writer died (status still running) may end inside a
        frame or on one whose last bytes are zeros: its frame headers are walked, chunk by chunk,
        to the last whole frame."""
        from .frames import FRAME_HEADER_SIZE, HEADER

        running = self.status_body.startswith("1")
        if not running and size >= 4 and os.pread(fd, 4, self._frames_start + size - 4) == b"\0\0\0\0":
            return size - 4
        pos, buf_start, buf = 0, 0, b""
        while pos + FRAME_HEADER_SIZE <= size:
            if not buf_start <= pos <= buf_start + len(buf) - FRAME_HEADER_SIZE:
                buf_start, buf = pos, os.pread(fd, self.CHUNK, self._frames_start + pos)
            tp, length = HEADER.unpack_from(buf, pos - buf_start)
            if tp == 0 or pos + FRAME_HEADER_SIZE + length > size:
                break  # the end marker, or a frame cut short by the writer's death
            pos += FRAME_HEADER_SIZE + length
        return pos

    def request(self, packet):
        raise StubError("a trace file answers no packets")

    def stacks_chunk(self, first, count=None):
        raise StubError("call stacks are unwound by gdbtrace-server (it has the process's modules); "
                        "a trace file has none -- connect to the stub that collected the frames")

    def status(self):
        running, fields, _ = self.trace_status()
        return {
            "source": "trace file %s" % self.path,
            "running": running,
            "stop_reason": next((k for k in fields if k.startswith("t") and k not in
                                 ("tframes", "tcreated", "tfree", "tsize")), ""),
            "frames": int(fields.get("tframes", "0"), 16) if fields.get("tframes") else None,
            "buffer": {"used": self._stream_end, "stream": self._stream_end, "size": int(fields["tsize"], 16) if fields.get("tsize") else None,
                       "frames": int(fields.get("tframes", "0"), 16) if fields.get("tframes") else None},
            "tracepoints": [],
        }

    def frames_chunk(self, offset, length=None):
        length = length or self.CHUNK
        end = min(offset + length, self._stream_end)
        data = os.pread(self._file.fileno(), max(0, end - offset), self._frames_start + offset)
        return data, offset + len(data) >= self._stream_end

    def trace_status(self):
        parts = self.status_body.split(";")
        fields = {}
        for part in parts[1:]:
            key, _, value = part.partition(":")
            fields[key] = value
        return parts[0] == "1", fields, self.status_body

    def upload_tracepoints(self):
        return [l for l in self.tp_lines if not l.startswith("V")]

    def upload_tsvs(self):
        return list(self.tsv_lines)

    def tracepoint_usage(self, number, address):
        for line in self.tp_lines:
            if line.startswith("V%x:%x:" % (number, address)):
                return "V" + line.split(":", 2)[2]
        return None

    def tdesc(self):
        return "\n".join(self.tdesc_lines) if self.tdesc_lines else None


def tracepoint_addresses(upload_lines):
    """{target tracepoint number: [addresses]} from qTfP/tfile 'T' lines."""
    out = {}
    for line in upload_lines:
        if line.startswith("T"):
            num, addr = line[1:].split(":")[:2]
            out.setdefault(int(num, 16), []).append(int(addr, 16))
    return out
