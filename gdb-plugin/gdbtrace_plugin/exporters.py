"""Writers for decoded trace frames (no gdb import).

Each exporter consumes records `(index, tp, label, ts, tid, names, values)`:
frame index in the buffer, tracepoint number, its label, timestamp in µs (or the
frame index when the frames carry no $trace_timestamp), thread id, and the
column names/values of that frame (values already in display form: ints,
floats, strings, None for "not collected").
"""

import csv
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


class _NameCache:
    """JSON-encoded column names per tuple of names (plans reuse one tuple)."""

    def __init__(self):
        self._cache = {}

    def get(self, names):
        key = id(names)
        hit = self._cache.get(key)
        if hit is None or hit[0] is not names:
            hit = self._cache[key] = (names, [json.dumps(n) + "" for n in names])
        return hit[1]


def write_jsonl(out, records, meta):
    """One JSON object per frame: frame, tracepoint, ts|order, thread, values."""
    names_cache = _NameCache()
    ts_key = '"ts_us"' if meta.get("timestamps") == "trace_timestamp" else '"order"'
    count = 0
    write = out.write
    for index, tp, _label, ts, tid, names, values in records:
        write('{"frame":%d,"tracepoint":%d,%s:%s,"thread":%s,"values":%s}\n' % (
            index, tp, ts_key, json_value(ts), json_value(tid), _json_object(names_cache.get(names), values)))
        count += 1
    return count


def write_csv(out, records, meta, columns):
    """Header `frame,tracepoint,ts_us|order,thread,<columns>`; one row per frame."""
    writer = csv.writer(out, lineterminator="\n")
    ts_col = "ts_us" if meta.get("timestamps") == "trace_timestamp" else "order"
    writer.writerow(["frame", "tracepoint", ts_col, "thread"] + list(columns))
    position = {name: i for i, name in enumerate(columns)}
    width = len(columns)
    layouts = {}
    count = 0
    writerow = writer.writerow
    for index, tp, _label, ts, tid, names, values in records:
        layout = layouts.get(id(names))
        if layout is None or layout[0] is not names:
            slots = [position.get(n) for n in names]
            identity = slots == list(range(width))
            layout = layouts[id(names)] = (names, slots, identity)
        _, slots, identity = layout
        if identity:
            row = values
        else:
            row = [None] * width
            for slot, v in zip(slots, values):
                if slot is not None:
                    row[slot] = v
        writerow([index, tp, ts, tid if tid is not None else ""] + ["" if v is None else v for v in row])
        count += 1
    return count


def write_perfetto(out, records, meta):
    """Chrome trace-event JSON (opens in ui.perfetto.dev / chrome://tracing):
    one instant event per frame, ts in µs, args = the decoded values."""
    pid = meta.get("pid") or 1
    names_cache = _NameCache()
    out.write('{"displayTimeUnit":"ms","otherData":%s,"traceEvents":[\n' % json.dumps({
        "generator": "gdbtrace plugin",
        "timestamps": meta.get("timestamps_note", ""),
        "program": meta.get("program", ""),
    }))
    out.write('{"name":"process_name","ph":"M","pid":%d,"tid":%d,"args":{"name":%s}}' % (
        pid, pid, json.dumps(meta.get("program") or "tracee")))
    seen_threads = set()
    label_json = {}
    count = 0
    write = out.write
    for index, tp, label, ts, tid, names, values in records:
        t = tid if tid is not None else pid
        if t not in seen_threads:
            seen_threads.add(t)
            write(',\n{"name":"thread_name","ph":"M","pid":%d,"tid":%d,"args":{"name":%s}}' % (
                pid, t, json.dumps(meta.get("thread_names", {}).get(t, "thread %d" % t))))
        lj = label_json.get(tp)
        if lj is None:
            lj = label_json[tp] = json.dumps(label)
        args = _json_object(names_cache.get(names), values)
        write(',\n{"name":%s,"cat":"tracepoint","ph":"i","s":"t","ts":%s,"pid":%d,"tid":%d,"args":{"frame":%d%s%s}}' % (
            lj, json_value(ts), pid, t, index, "," if len(args) > 2 else "", args[1:-1]))
        count += 1
    out.write("\n]}\n")
    return count


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
