"""`gdbtrace export`: every trace frame to perfetto JSON, CSV, JSON lines or a tfile."""

import os
import re
import time

import gdb

from . import exporters, frames as frames_mod
from .stacks_commands import stack_table
from .session import TraceData, UserError, program_name, stub_errors_as_user_errors
from .transport import StubError, TfileSource



def _export_tfile(path, data):
    """Frames written. The stub's own writer when it runs on this host (the file then says which
    registers no frame holds: <unavailable>, as after `tsave -r`); else header and frames from
    packets, with every register of a frame's 'R' block, collected or not (as plain `tsave`)."""
    stub = data.stub
    if not isinstance(stub, TfileSource):
        open(path, "wb").close()  # the stub fills only an existing, empty file
        if stub.save_file(path):
            return int(stub.trace_status()[1].get("tframes", "0"), 16)
        gdb.write("gdbtrace export: gdbtrace-server runs on another host: registers a frame did not "
                  "collect read as 0 from %s (`tsave -r` on that host marks them unavailable).\n" % path)
    _running, _fields, status_body = stub.trace_status()
    tsvs = stub.upload_tsvs()
    tps = stub.upload_tracepoints()
    usage = []
    for line in tps:
        m = re.match(r"^T([0-9a-fA-F]+):([0-9a-fA-F]+):", line)
        if m:
            v = stub.tracepoint_usage(int(m.group(1), 16), int(m.group(2), 16))
            if v:
                usage.append("V%s:%s:%s" % (m.group(1), m.group(2), v[1:]))
    tdesc = stub.tdesc() if hasattr(stub, "tdesc") else None
    if tdesc is None:
        try:
            tdesc = gdb.execute("maint print xml-tdesc", to_string=True)
            if "<target" not in tdesc:
                tdesc = None
        except gdb.error:
            tdesc = None
    header = exporters.tfile_header(data.regblock_size, status_body, tsvs, tps + usage, tdesc)
    counter = frames_mod.FrameCounter()  # walks the frame headers: the copy must end on a frame boundary
    total = 0
    with open(path, "wb") as out:
        out.write(header)
        for _off, chunk in stub.iter_stream(0):
            out.write(chunk)
            counter.feed(chunk)
            total += len(chunk)
        out.write(exporters.TFILE_END)
    if counter.complete_bytes != total:
        raise StubError("the frame stream ends inside a frame (%d bytes left over)" % (total - counter.complete_bytes))
    return counter.frames


def _progress_line(start, what, every=2.0):
    """A callback printing "N frames so far" at most every EVERY seconds, from the first EVERY on
    (short exports print nothing)."""
    state = {"next": start + every}

    def progress(count):
        now = time.monotonic()
        if now >= state["next"]:
            state["next"] = now + every
            gdb.write("gdbtrace export %s: %d frames so far (%.1f s)\n" % (what, count, now - start))
            gdb.flush()

    return progress


class ExportCommand(gdb.Command):
    """Export every trace frame to a file, decoded with the collected expressions' types.

Usage: gdbtrace export FORMAT FILE
  perfetto  Chrome trace-event JSON (open in ui.perfetto.dev): one instant event per
            frame, ts in microseconds, pid/tid, args = decoded values
  csv       one row per frame: frame, tracepoint, ts_us (or order), thread, one column
            per collected expression (structs flattened to members)
  jsonl     one JSON object per frame
  tfile     gdb's trace file format (`target tfile FILE` reads it back)
Timestamps come from a collected $trace_timestamp; when some tracepoint does not
collect it, frame order is used instead and the output says so."""

    def __init__(self):
        super().__init__("gdbtrace export", gdb.COMMAND_TRACEPOINTS, gdb.COMPLETE_FILENAME)
        self.fast = True

    def invoke(self, arg, from_tty):
        args = gdb.string_to_argv(arg)
        # Undocumented: -slow decodes every frame the general way (tests compare both paths).
        self.fast = "-slow" not in args
        args = [a for a in args if a != "-slow"]
        if len(args) != 2:
            raise UserError("usage: gdbtrace export FORMAT FILE  (FORMAT: %s)" % ", ".join(exporters.FORMATS))
        fmt, path = args[0].lower(), os.path.expanduser(args[1])
        if fmt not in exporters.FORMATS:
            raise UserError("gdbtrace export: unknown format `%s` (choose %s)" % (args[0], ", ".join(exporters.FORMATS)))
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            raise UserError("gdbtrace export: directory %s does not exist" % directory)
        stub_errors_as_user_errors(lambda: self._export(fmt, path))

    def _export(self, fmt, path):
        start, cpu = time.monotonic(), time.process_time()
        data = TraceData(need_threads=(fmt != "tfile"))
        if fmt == "tfile":
            count = _export_tfile(path, data)
            gdb.write("Exported %d frames to %s (tfile) in %.2f s (cpu %.2f s).\n" % (
                count, path, time.monotonic() - start, time.process_time() - cpu))
            return
        meta = {"timestamps": data.timestamps, "timestamps_note": data.timestamps_note,
                "pid": data.pid(), "program": program_name(),
                "thread_names": data.threads.names if data.threads else {}}
        if fmt == "perfetto":
            meta["stacks"] = stack_table()
        tmp = path + ".part"
        with open(tmp, "w", newline="" if fmt == "csv" else None) as out:
            if fmt == "csv":
                exporter = exporters.CsvExporter(out, meta, data.columns())
            elif fmt == "jsonl":
                exporter = exporters.JsonlExporter(out, meta)
            else:
                exporter = exporters.PerfettoExporter(out, meta)
            count = exporters.export_runs(exporter, data.runs(fast=self.fast, markers=True),
                                          _progress_line(start, fmt))
        os.replace(tmp, path)
        gdb.write("Exported %d frames to %s (%s) in %.2f s (cpu %.2f s); %s.\n" % (
            count, path, fmt, time.monotonic() - start, time.process_time() - cpu, data.timestamps_note))
        if data.markers_note():
            gdb.write("gdbtrace export: %s%s.\n" % (
                data.markers_note(), "; jsonl has a \"dropped\" line at each" if fmt == "jsonl" else ""))
