"""Writers for decoded trace frames (no gdb import).

Exporters consume Runs from batch.Runner: a plan (tracepoint, label, leaves)
and rows (frame index, ts, tid, values...). ts is $trace_timestamp in µs, or
the frame index when not every tracepoint collects it; values are raw (ints,
floats, strings; None for "not in this frame") and shown per leaf kind
(pointers in hex, enums by name).
"""

import csv
import functools
import json
import math

FORMATS = ("perfetto", "csv", "jsonl", "tfile")


def json_value(v):
    """JSON text of one value (fast path for the common scalar types)."""
    t = type(v)
    if t is int:
        return str(v)
    if v is None:
        return "null"
    if t is float:
        return repr(v) if math.isfinite(v) else json.dumps(str(v))
    if t is bool:
        return "true" if v else "false"
    return json.dumps(v if t is str else str(v))


def _json_object(names_json, values):
    return "{" + ",".join(n + ":" + json_value(v) for n, v in zip(names_json, values) if v is not None) + "}"


def _display(leaf, v):
    return None if v is None else leaf.display(v)


_PERCENT = {"int": "%d", "ptr": "%#x", "float": "%r"}


def _percent_ref(leaf, quote_ptr):
    """%-format conversion for a leaf (values taken in row order), or None."""
    ref = _PERCENT.get(leaf.kind)
    if ref is not None and quote_ptr and leaf.kind == "ptr":
        ref = '"%#x"'
    return ref


def _finite_floats(run):
    cols = [3 + i for i, leaf in enumerate(run.plan.leaves) if leaf.kind == "float"]
    return all(all(map(math.isfinite, run.columns[c])) for c in cols)


BATCH = 2048  # rows per % operation (and per write) in fill()


@functools.lru_cache(maxsize=64)
def _repeated(fmt, times, encoding):
    return (fmt * times).encode(encoding)


def fill(out, fmt, columns, n):
    """Writes FMT (a %-template of one row) for N rows, its conversions taking their values from
    COLUMNS in turn: one % operation and one write per BATCH rows over a flat tuple of the values
    (interleaved by slice assignment) -- no Python call, tuple or string per row. The template is
    applied as bytes, whose % finds the literal text with memchr where str's % steps through it
    character by character (a Perfetto event is ~190 characters of literal text), and the bytes go
    to the file's binary buffer: the same bytes the text layer would write (its encoding; no newline
    translation on Linux)."""
    encoding = getattr(out, "encoding", None) or "utf-8"
    buffer = getattr(out, "buffer", None)
    if buffer is not None:
        out.flush()  # what the text layer holds comes first
        write = buffer.write
    else:  # e.g. io.StringIO
        def write(data):
            out.write(data.decode(encoding))
    width = len(columns)
    flat = [None] * (n * width)
    for k, column in enumerate(columns):
        flat[k::width] = column
    for first in range(0, n, BATCH):
        rows = min(BATCH, n - first)
        write(_repeated(fmt, rows, encoding) % tuple(flat[first * width : (first + rows) * width]))


class Exporter:
    """Writes Runs (see batch.py). A run whose values are all present and scalar
    is written with one %-template per plan (fill(): no Python code per frame);
    others row by row through write_row."""

    def __init__(self, out, meta):
        self.out = out
        self.meta = meta
        self.count = 0
        self._templates = {}
        self._names = {}

    def begin(self):
        pass

    def end(self):
        pass

    def write_marker(self, marker):
        """A loss marker (batch.Marker): no row; jsonl says where in its place."""

    def write_run(self, run):
        self.count += len(run)
        template = None
        if run.clean:
            key = (id(run.plan), run.has_tid)
            hit = self._templates.get(key)
            if hit is None or hit[0] is not run.plan:
                hit = self._templates[key] = (run.plan, self.template(run.plan, run.has_tid))
            template = hit[1]
        if template is not None and self.run_ok(run):
            self.before_rows(run)
            fmt, order = template
            columns = run.columns
            fill(self.out, fmt, [columns[c] for c in order], len(run))
            return
        plan = run.plan
        for row in run.rows:
            self.write_row(plan, row)

    def json_names(self, plan):
        names = self._names.get(id(plan))
        if names is None or names[0] is not plan:
            names = self._names[id(plan)] = (plan, [json.dumps(n) for n in plan.names])
        return names[1]

    def run_ok(self, run):
        return True

    def before_rows(self, run):
        pass

    def template(self, plan, has_tid):
        """(FMT, ORDER): a %-template of one row and, per conversion in it, the row position
        (0 index, 1 ts, 2 tid, 3 + k leaf k) it formats; None when some leaf needs Python code."""
        return None

    def write_row(self, plan, row):
        raise NotImplementedError


class JsonlExporter(Exporter):
    """One JSON object per frame: frame, tracepoint, ts_us|order, thread, values."""

    def begin(self):
        self.ts_key = '"ts_us"' if self.meta.get("timestamps") == "trace_timestamp" else '"order"'

    def template(self, plan, has_tid):
        parts = []
        for leaf in plan.leaves:
            ref = _percent_ref(leaf, quote_ptr=True)
            if ref is None:
                return None
            parts.append(json.dumps(leaf.name).replace("%", "%%") + ":" + ref)
        fmt = '{"frame":%%d,"tracepoint":%d,%s:%%d,"thread":%s,"values":{%s}}\n' % (
            plan.tp, self.ts_key, "%d" if has_tid else "null", ",".join(parts))
        return fmt, [0, 1] + ([2] if has_tid else []) + list(range(3, 3 + len(plan.leaves)))

    def run_ok(self, run):
        return _finite_floats(run)

    def write_marker(self, marker):
        self.out.write('{"frame":%d,"tracepoint":%d,"dropped":%d}\n' % (marker.index, marker.tp, marker.dropped))

    def write_row(self, plan, row):
        values = [_display(leaf, v) for leaf, v in zip(plan.leaves, row[3:])]
        self.out.write('{"frame":%d,"tracepoint":%d,%s:%s,"thread":%s,"values":%s}\n' % (
            row[0], plan.tp, self.ts_key, json_value(row[1]), json_value(row[2]),
            _json_object(self.json_names(plan), values)))


class CsvExporter(Exporter):
    """Header `frame,tracepoint,ts_us|order,thread,<columns>`; one row per frame."""

    def __init__(self, out, meta, columns):
        super().__init__(out, meta)
        self.columns = list(columns)

    def begin(self):
        self.writer = csv.writer(self.out, lineterminator="\n")
        ts_col = "ts_us" if self.meta.get("timestamps") == "trace_timestamp" else "order"
        self.writer.writerow(["frame", "tracepoint", ts_col, "thread"] + self.columns)
        self.position = {name: i for i, name in enumerate(self.columns)}

    def template(self, plan, has_tid):
        cells = [None] * len(self.columns)  # (conversion, leaf position) per CSV column
        for k, leaf in enumerate(plan.leaves):
            slot = self.position.get(leaf.name)
            if slot is None:
                continue
            ref = _percent_ref(leaf, quote_ptr=False)
            if ref is None:
                return None  # strings may need quoting: the csv module writes those rows
            cells[slot] = (ref, 3 + k)
        fmt = ",".join(["%d", str(plan.tp), "%d", "%d" if has_tid else ""] + [c[0] if c else "" for c in cells])
        return fmt + "\n", [0, 1] + ([2] if has_tid else []) + [c[1] for c in cells if c]

    def write_row(self, plan, row):
        cells = [""] * len(self.columns)
        for leaf, v in zip(plan.leaves, row[3:]):
            slot = self.position.get(leaf.name)
            if slot is not None and v is not None:
                cells[slot] = _display(leaf, v)
        self.writer.writerow([row[0], plan.tp, "" if row[1] is None else row[1],
                              "" if row[2] is None else row[2]] + cells)


class PerfettoExporter(Exporter):
    """Chrome trace-event JSON (opens in ui.perfetto.dev / chrome://tracing):
    one instant event per frame, ts in µs, pid/tid, args = frame index and values."""

    def begin(self):
        self.pid = self.meta.get("pid") or 1
        self._threads = set()
        self.last_ts = 0
        other = {
            "generator": "gdbtrace plugin",
            "timestamps": self.meta.get("timestamps_note", ""),
            "program": self.meta.get("program", ""),
        }
        table = self.meta.get("stacks")
        if table and table.modules:
            # The stacks' modules by build-id: what names a frame shown as module+0xOFFSET
            # later (debuginfod, or addr2line on the unstripped file).
            other["modules"] = [m.as_json() for _, m in sorted(table.modules.items())]
        self.out.write('{"displayTimeUnit":"ms","otherData":%s,"traceEvents":[\n' % json.dumps(other))
        self.out.write('{"name":"process_name","ph":"M","pid":%d,"tid":%d,"args":{"name":%s}}' % (
            self.pid, self.pid, json.dumps(self.meta.get("program") or "tracee")))

    def end(self):
        table = self.meta.get("stacks")
        if not table or not table.by_frame:
            self.out.write("\n]}\n")
            return
        # Trace Event Format: events refer to a node of "stackFrames" with "sf".
        self.out.write('\n],"stackFrames":{')
        self.out.write(",".join(
            '"%d":{"name":%s%s}' % (i, json.dumps(name), "" if parent is None else ',"parent":"%d"' % parent)
            for i, (name, parent) in enumerate(table.nodes)))
        self.out.write("}}\n")

    def _thread(self, tid):
        if tid not in self._threads:
            self._threads.add(tid)
            name = self.meta.get("thread_names", {}).get(tid, "thread %d" % tid)
            self.out.write(',\n{"name":"thread_name","ph":"M","pid":%d,"tid":%d,"args":{"name":%s}}' % (
                self.pid, tid, json.dumps(name)))

    def before_rows(self, run):
        if run.has_tid:
            for tid in dict.fromkeys(run.columns[2]):  # first-appearance order
                self._thread(tid)
        else:
            self._thread(self.pid)
        self.last_ts = run.columns[1][-1]

    def run_ok(self, run):
        return _finite_floats(run)

    def template(self, plan, has_tid):
        if self.meta.get("stacks"):
            return None  # each event gets its own stack: row by row
        parts = ['"frame":%d']
        for leaf in plan.leaves:
            ref = _percent_ref(leaf, quote_ptr=True)
            if ref is None:
                return None
            parts.append(json.dumps(leaf.name).replace("%", "%%") + ":" + ref)
        fmt = (',\n{"name":%s,"cat":"tracepoint","ph":"i","s":"t","ts":%%d,"pid":%d,"tid":%s,"args":{%s}}'
               % (json.dumps(plan.label).replace("%", "%%"), self.pid, "%d" if has_tid else str(self.pid),
                  ",".join(parts)))
        # The event text wants ts, tid, then the index and the values.
        return fmt, [1] + ([2] if has_tid else []) + [0] + list(range(3, 3 + len(plan.leaves)))

    def write_row(self, plan, row):
        index, ts, tid = row[0], row[1], row[2]
        if ts is None:
            ts = self.last_ts  # e.g. while-stepping frames without $trace_timestamp
        self.last_ts = ts
        t = tid if tid is not None else self.pid
        self._thread(t)
        values = [_display(leaf, v) for leaf, v in zip(plan.leaves, row[3:])]
        args = _json_object(self.json_names(plan), values)
        table = self.meta.get("stacks")
        stack = table.by_frame.get(index) if table else None
        sf = ',"sf":"%d"' % stack[0] if stack else ""
        if stack:
            args = args[:-1] + ("," if len(args) > 2 else "") + '"stack":%s}' % json.dumps(stack[1])
        self.out.write(',\n{"name":%s,"cat":"tracepoint","ph":"i","s":"t","ts":%s,"pid":%d,"tid":%d%s,'
                       '"args":{"frame":%d%s%s}}' % (json.dumps(plan.label), json_value(ts), self.pid, t, sf,
                                                     index, "," if len(args) > 2 else "", args[1:-1]))


def export_runs(exporter, runs, progress=None):
    """Feeds every run to EXPORTER between begin() and end(); returns the number of frames.
    PROGRESS, if given, is called with the frame count after each run."""
    exporter.begin()
    for run in runs:
        if not hasattr(run, "plan"):  # a loss marker (batch.Marker)
            exporter.write_marker(run)
            continue
        exporter.write_run(run)
        if progress is not None:
            progress(exporter.count)
    exporter.end()
    return exporter.count


def tfile_header(regblock_size, status_body, tsv_lines, tp_lines, tdesc_xml):
    """The text part of a tfile, as gdb's `tsave` writes it (tracefile-tfile.c):
    magic, register block size, tdesc, status, tsv/tp definitions, blank line."""
    parts = ["\x7fTRACE0\n", "R %x\n" % regblock_size]
    if tdesc_xml:
        parts += ["tdesc %s\n" % line for line in tdesc_xml.splitlines() if line]
    parts.append("status %s\n" % status_body)
    parts += ["tsv %s\n" % line for line in tsv_lines]
    parts += ["tp %s\n" % line for line in tp_lines]
    parts.append("\n")
    return "".join(parts).encode("latin-1")


TFILE_END = b"\0\0\0\0"  # gdb's tfile writer ends the frames with a zero u16 tracepoint + 2 bytes
