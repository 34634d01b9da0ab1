"""The `gdbtrace` commands."""

import os
import re
import shlex
import tempfile
import threading
import time

import gdb

from . import exporters, functions, latency, regs, stats
from .session import (Threads, TraceData, UserError, any_linespec, check_gdbtrace, current_stub, iter_frames, program_name,
                      register_block_size, tracepoint_defs, tracepoint_map)
from . import batch, decode, frames as frames_mod
from .transport import StubError, TfileSource


def _wrap(fn):
    """Run a command body; stub failures become one-line errors."""
    try:
        return fn()
    except StubError as e:
        raise UserError("gdbtrace: %s" % e)


class GdbtracePrefix(gdb.Command):
    """gdbtrace: views, exports and statistics of gdbtrace-server trace frames.

Frames are fetched in bulk (qGdbtrace.frames) and decoded in Python with the
collected expressions' types; no tfind per frame."""

    def __init__(self):
        super().__init__("gdbtrace", gdb.COMMAND_TRACEPOINTS, gdb.COMPLETE_NONE, True)


# ---------------------------------------------------------------------------------------------
# status


def _fmt_bytes(n):
    if not isinstance(n, (int, float)):
        return str(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return ("%d %s" % (n, unit)) if unit == "B" else ("%.1f %s" % (n, unit))
        n /= 1024.0
    return str(n)


def _get(d, *keys, default=None):
    for k in keys:
        if isinstance(d, dict) and k in d:
            return d[k]
    return default


# Above this many tracepoint locations `gdbtrace status` sums them per collector (-all: every row).
STATUS_ROWS = 50


def format_status(status, all_rows=False, top=10, symbolizer=None):
    """Text for `gdbtrace status` from the stub's JSON: a row per tracepoint location (a sum per
    collector above STATUS_ROWS locations, unless ALL_ROWS), then the TOP functions by hits."""
    lines = []
    running = status.get("running")
    reason = status.get("stop_reason") or ""
    text = status.get("stop_text") or ""
    if running:
        lines.append("Trace run: running")
    else:
        lines.append("Trace run: stopped%s%s" % (" (%s)" % reason if reason else "", ": " + text if text else ""))
    if status.get("source"):
        lines.append("Source: %s" % status["source"])
    if status.get("collectors_text"):
        lines.append("Collectors (monitor gdbtrace backend):")
        lines.extend("  " + line.strip() for line in status["collectors_text"].splitlines() if line.strip())
    buf = status.get("buffer") or {}
    if buf:
        used, size = buf.get("used"), buf.get("size")
        pct = " (%.1f%%)" % (100.0 * used / size) if isinstance(used, (int, float)) and size else ""
        extra = []
        if buf.get("created") is not None and buf.get("created") != buf.get("frames"):
            extra.append("%s created" % buf["created"])
        if buf.get("discarded"):
            extra.append("%s discarded (circular)" % buf["discarded"])
        if buf.get("circular"):
            extra.append("circular")
        lines.append("Buffer: %s of %s used%s, %s frames%s" % (
            _fmt_bytes(used), _fmt_bytes(size), pct, buf.get("frames", "?"),
            "; " + ", ".join(extra) if extra else ""))
    tps = status.get("tracepoints") or []
    if not tps:
        lines.append("No tracepoints on the stub.")
        return "\n".join(lines)
    # No cost/hit column: the stub reports no per-hit timing (bench/ measures it).
    # hits = frames + drops + after stop (hits the probe saw while the run was stopping; "-": the
    # source does not say, e.g. a tfile).
    head = ["tp", "address", "backend", "hits", "frames", "drops", "after stop", "errors", "bytes"]
    rows = []
    for t in tps:
        backend = t.get("backend") or ("-" if not running else "?")
        if t.get("enabled") is False:
            backend += " (disabled)"
        address = t.get("address", "")
        rows.append([str(t.get("number", "?")), address if isinstance(address, str) else "0x%x" % address,
                     backend, str(t.get("hits", 0)), str(t.get("frames", 0)), str(t.get("drops", 0)),
                     str(t.get("after_stop", "-")), str(t.get("errors", 0)), _fmt_bytes(t.get("bytes", 0))])
    if len(tps) > STATUS_ROWS and not all_rows:
        lines.extend(_per_collector_lines(tps, running))
    else:
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
        lines.append("  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip())
        for t, r in zip(tps, rows):
            lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
            # Why a tracepoint is not on the preferred collector, when the stub says so: verbatim.
            if t.get("fallback"):
                lines.append("    " + str(t["fallback"]))
    lines.extend(functions.format_top_functions(tps, top, symbolizer or functions.symbolize))
    if status.get("stacks"):
        lines.append("Stacks: %d bytes from $sp per hit (gdbtrace stacks, gdbtrace flamegraph)" % status["stacks"])
    return "\n".join(lines)


def _per_collector_lines(tps, running):
    """One line per collector summing its locations' counters (the rows of thousands of
    tracepoints would bury everything else)."""
    sums = {}
    for t in tps:
        backend = t.get("backend") or ("-" if not running else "?")
        s = sums.setdefault(backend, {"locations": 0, "hits": 0, "frames": 0, "drops": 0, "errors": 0,
                                      "bytes": 0})
        s["locations"] += 1
        for k in ("hits", "frames", "drops", "errors", "bytes"):
            s[k] += t.get(k) or 0
    lines = ["%d tracepoint locations (gdbtrace status -all: one row each):" % len(tps)]
    for backend, s in sorted(sums.items(), key=lambda kv: -kv[1]["locations"]):
        lines.append("  %s: %d locations, hits %d, frames %d, drops %d, errors %d, %s" % (
            backend, s["locations"], s["hits"], s["frames"], s["drops"], s["errors"], _fmt_bytes(s["bytes"])))
    return lines


def _monitor_backends():
    """The stub's `monitor gdbtrace backend` text (collectors available here), or None."""
    try:
        text = gdb.execute("monitor gdbtrace backend", to_string=True)
    except gdb.error:
        return None
    return text.strip() or None


class StatusCommand(gdb.Command):
    """Show the trace run: backend, hits, frames, drops, errors per tracepoint, buffer use.

Per tracepoint location: the collector serving it (module, ebpf, ptrace), hits,
frames, drops, hits after the stop (hits = frames + drops + after stop), errors, bytes; buffer use; the stack snapshot size when stacks are on; from
the stub's qGdbtrace.status. (Per-hit cost is measured by bench/, not here.)

With several locations, the functions with the most hits follow (-top N, default 10;
-top 0: none). Above 50 locations the rows are summed per collector (-all: every row).

Usage: gdbtrace status [-json] [-all] [-top N]"""

    def __init__(self):
        super().__init__("gdbtrace status", gdb.COMMAND_TRACEPOINTS, gdb.COMPLETE_NONE)

    def invoke(self, arg, from_tty):
        args = gdb.string_to_argv(arg)
        usage = "usage: gdbtrace status [-json] [-all] [-top N]"
        as_json, all_rows, top = False, False, 10
        while args:
            a = args.pop(0)
            if a == "-json":
                as_json = True
            elif a == "-all":
                all_rows = True
            elif a == "-top" and args and args[0].isdigit():
                top = int(args.pop(0))
            else:
                raise UserError(usage)

        def body():
            stub = current_stub()
            status = check_gdbtrace(stub)
            if not isinstance(stub, TfileSource):
                collectors = _monitor_backends()
                if collectors:
                    status["collectors_text"] = collectors
            if as_json:
                import json
                gdb.write(json.dumps(status, indent=2, sort_keys=True) + "\n")
            else:
                gdb.write(format_status(status, all_rows, top) + "\n")
        _wrap(body)


# ---------------------------------------------------------------------------------------------
# export


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
        _wrap(lambda: self._export(fmt, path))

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
            meta["stacks"] = _stack_table()
        tmp = path + ".part"
        with open(tmp, "w", newline="" if fmt == "csv" else None) as out:
            if fmt == "csv":
                exporter = exporters.CsvExporter(out, meta, data.columns())
            elif fmt == "jsonl":
                exporter = exporters.JsonlExporter(out, meta)
            else:
                exporter = exporters.PerfettoExporter(out, meta)
            count = exporters.export_runs(exporter, data.runs(fast=self.fast), _progress_line(start, fmt))
        os.replace(tmp, path)
        gdb.write("Exported %d frames to %s (%s) in %.2f s (cpu %.2f s); %s.\n" % (
            count, path, fmt, time.monotonic() - start, time.process_time() - cpu, data.timestamps_note))


# ---------------------------------------------------------------------------------------------
# stats / plot


def _split_by(arg):
    m = re.match(r"^(.*?)\s+by\s+(tracepoint|thread)\s*$", arg.strip())
    if m:
        return m.group(1).strip(), m.group(2)
    return arg.strip(), None


def collect_values(expr, group=None):
    """[(group_key, ts_or_index, value)] of EXPR over all frames that hold it."""
    data = TraceData(exprs=[expr], need_threads=(group == "thread"), report=False)
    out = []
    checked = set()
    for run in data.runs():
        plan = run.plan
        if id(plan) not in checked:
            checked.add(id(plan))
            if len(plan.leaves) > 1:
                raise UserError("gdbtrace: `%s` is not a scalar (%d members: %s...); pick one, e.g. `%s`" % (
                    expr, len(plan.leaves), ", ".join(plan.names[:3]), plan.names[0]))
            if plan.leaves and not plan.leaves[0].numeric:
                raise UserError("gdbtrace: `%s` is not numeric (%s)" % (expr, plan.leaves[0].kind))
        if not plan.leaves:
            continue
        if group == "tracepoint":
            key = plan.label
            out.extend((key, row[1], row[3]) for row in run.rows if row[3] is not None)
        elif group == "thread":
            names = data.threads.names
            out.extend((names.get(row[2], "thread %s" % row[2]) if row[2] is not None else "unknown thread",
                        row[1], row[3]) for row in run.rows if row[3] is not None)
        else:
            out.extend(("all", row[1], row[3]) for row in run.rows if row[3] is not None)
    return data, out


def _no_values_error(expr, data):
    problems = "; ".join("tp %d: %s" % (p.tp, m) for p in data.decoder.plans() for _e, m in p.problems)
    raise UserError("gdbtrace: no trace frame holds a value of `%s`%s (is it collected? `info tracepoints`)" % (
        expr, " -- " + problems if problems else ""))


class StatsCommand(gdb.Command):
    """Statistics of a collected expression over all trace frames.

Usage: gdbtrace stats EXPR [by tracepoint|thread]
Prints count, min, max, mean, p50, p90, p99 (per group) and a histogram.
EXPR is any expression whose memory the frames hold (a collected variable, a
member of a collected struct, a register like $rsp, $trace_timestamp)."""

    def __init__(self):
        super().__init__("gdbtrace stats", gdb.COMMAND_TRACEPOINTS, gdb.COMPLETE_EXPRESSION)

    def invoke(self, arg, from_tty):
        expr, group = _split_by(arg)
        if not expr:
            raise UserError("usage: gdbtrace stats EXPR [by tracepoint|thread]")
        if re.search(r"\sby\s+\S+\s*$", arg) and group is None:
            raise UserError("gdbtrace stats: group by `tracepoint` or `thread`")

        def body():
            data, values = collect_values(expr, group)
            if not values:
                _no_values_error(expr, data)
            groups = {}
            for key, _ts, v in values:
                groups.setdefault(key, []).append(v)
            table = [(k, stats.Summary(vs)) for k, vs in sorted(groups.items(), key=lambda kv: str(kv[0]))]
            if group is not None and len(table) > 1:
                table.append(("all", stats.Summary([v for _k, _t, v in values])))
            gdb.write("Statistics of %s over %d frames:\n" % (expr, len(values)))
            gdb.write(stats.summary_table(table) + "\n\n")
            gdb.write("Histogram of %s:\n%s\n" % (expr, stats.ascii_histogram([v for _k, _t, v in values])))
        _wrap(body)


def plot_png(path, expr, series, ts_label):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UserError("gdbtrace plot needs matplotlib, which this gdb's Python cannot import "
                        "(Debian: apt-get install python3-matplotlib); `gdbtrace stats` prints the "
                        "same numbers as text")
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 7))
    for key, points in series.items():
        xs = [p[0] for p in points]
        ys = [p[1] for p in points]
        top.plot(xs, ys, ".", markersize=3, label=str(key))
    top.set_xlabel(ts_label)
    top.set_ylabel(expr)
    top.set_title("%s over time" % expr)
    if len(series) > 1:
        top.legend(fontsize="small")
    all_values = [p[1] for points in series.values() for p in points]
    bottom.hist(all_values, bins=min(50, max(5, len(set(all_values)))))
    bottom.set_xlabel(expr)
    bottom.set_ylabel("frames")
    bottom.set_title("histogram of %s (%d frames)" % (expr, len(all_values)))
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)


class PlotCommand(gdb.Command):
    """Plot a collected expression: time series and histogram, as a PNG (needs matplotlib).

Usage: gdbtrace plot EXPR FILE.png"""

    def __init__(self):
        super().__init__("gdbtrace plot", gdb.COMMAND_TRACEPOINTS, gdb.COMPLETE_EXPRESSION)

    def invoke(self, arg, from_tty):
        try:
            parts = shlex.split(arg)
        except ValueError as e:
            raise UserError("gdbtrace plot: %s" % e)
        if len(parts) < 2 or not parts[-1].lower().endswith(".png"):
            raise UserError("usage: gdbtrace plot EXPR FILE.png")
        path = os.path.expanduser(parts[-1])
        expr = arg.strip()[: arg.strip().rfind(parts[-1])].strip().strip("'\"") or " ".join(parts[:-1])

        def body():
            data, values = collect_values(expr, "tracepoint")
            if not values:
                _no_values_error(expr, data)
            series = {}
            for key, ts, v in values:
                series.setdefault(key, []).append((ts, v))
            label = "time (us, $trace_timestamp)" if data.timestamps == "trace_timestamp" else "frame index"
            plot_png(path, expr, series, label)
            gdb.write("Wrote %s (%d frames; x axis: %s).\n" % (path, len(values), label))
        _wrap(body)


# ---------------------------------------------------------------------------------------------
# latency


def function_range(name):
    """(symbol, start, end) of function NAME (end exclusive)."""
    sym = gdb.lookup_global_symbol(name) or gdb.lookup_static_symbol(name)
    if sym is None:
        try:
            sym = gdb.lookup_symbol(name)[0]
        except gdb.error:
            sym = None
    if sym is None or sym.type is None or sym.type.code != gdb.TYPE_CODE_FUNC:
        raise UserError("gdbtrace latency: no function named `%s`" % name)
    start = int(sym.value().address)
    block = gdb.block_for_pc(start)
    while block is not None and block.function is None:
        block = block.superblock
    if block is None:
        raise UserError("gdbtrace latency: no debug info for the extent of `%s`" % name)
    return sym, block.start, block.end


def return_addresses(start, end):
    """Addresses of FUNCTION's ret instructions. Read from the executable file
    (trust-readonly-sections): in the process, a probe may have replaced the
    instruction with a breakpoint."""
    arch = gdb.selected_inferior().architecture()
    previous = gdb.parameter("trust-readonly-sections")
    gdb.execute("set trust-readonly-sections on", to_string=True)
    try:
        insns = arch.disassemble(start, end - 1)
    finally:
        gdb.execute("set trust-readonly-sections %s" % ("on" if previous else "off"), to_string=True)
    return [insn["addr"] for insn in insns if latency.is_return(insn["asm"])]


def _source_script(lines):
    with tempfile.NamedTemporaryFile("w", suffix=".gdb", delete=False) as f:
        f.write("\n".join(lines) + "\n")
        path = f.name
    try:
        gdb.execute("source %s" % path, to_string=True)
    finally:
        os.unlink(path)


def create_latency_tracepoints(name, start, rets):
    created = []
    for address in [start] + rets:
        out = gdb.execute("trace *0x%x" % address, to_string=True)
        m = re.search(r"Tracepoint (\d+) at", out)
        if not m:
            raise UserError("gdbtrace latency: could not create a tracepoint at 0x%x: %s" % (address, out.strip()))
        number = int(m.group(1))
        _source_script(["actions %d" % number, "collect $rsp, $trace_timestamp", "end"])
        created.append((number, address))
    return created


class LatencyCommand(gdb.Command):
    """Function entry->return durations, paired per call.

Usage: gdbtrace latency FUNCTION
The first time, creates tracepoints at FUNCTION's entry and at each of its `ret`
instructions (found by disassembling it), collecting $rsp and $trace_timestamp.
Run the trace (tstart ... tstop), then run the command again: entries and returns
are paired per call by stack pointer (equal at entry and at the ret) and the
durations summarised (count, min/max/mean/p50/p90/p99, histogram, microseconds).
Tail calls out of FUNCTION are not returns and are not seen."""

    def __init__(self):
        super().__init__("gdbtrace latency", gdb.COMMAND_TRACEPOINTS, gdb.COMPLETE_SYMBOL)

    def invoke(self, arg, from_tty):
        args = gdb.string_to_argv(arg)
        if len(args) != 1:
            raise UserError("usage: gdbtrace latency FUNCTION")
        _wrap(lambda: self._run(args[0]))

    def _run(self, name):
        _sym, start, end = function_range(name)
        rets = return_addresses(start, end)
        if not rets:
            raise UserError("gdbtrace latency: `%s` has no ret instruction (it only tail-calls or never returns)" % name)
        tpdefs = tracepoint_defs()
        entry_tps = {n for n, t in tpdefs.items() if any(loc.address == start for loc in t.locations)}
        ret_tps = {n for n, t in tpdefs.items() if any(loc.address in rets for loc in t.locations)}
        if not entry_tps or not ret_tps:
            stub = current_stub()
            check_gdbtrace(stub)
            if decode.timestamp_tsv(name) is None:
                raise UserError("gdbtrace latency: the stub defines no $trace_timestamp trace state variable "
                                "(see `info tvariables`), so durations cannot be measured")
            created = create_latency_tracepoints(name, start, [r for r in rets])
            gdb.write("Created tracepoint %d at the entry of %s (0x%x) and %s at its ret instruction%s, "
                      "collecting $rsp and $trace_timestamp.\nRun the trace (tstart, let %s run, tstop), "
                      "then `gdbtrace latency %s` again for the durations.\n" % (
                          created[0][0], name, start, ", ".join("%d (0x%x)" % c for c in created[1:]),
                          "s" if len(created) > 2 else "", name, name))
            return
        self._report(name, entry_tps, ret_tps)

    def _report(self, name, entry_tps, ret_tps):
        data = TraceData(exprs=["$rsp", "$trace_timestamp"], need_threads=False)
        if data.ts_tsv is None:
            raise UserError("gdbtrace latency: no $trace_timestamp trace state variable on this stub")
        events, skipped = [], 0
        for run in data.runs():
            tp = run.plan.tp
            if tp in entry_tps:
                kind = "entry"
            elif tp in ret_tps:
                kind = "return"
            else:
                continue
            for row in run.rows:
                rsp, ts = row[3], row[4]
                if rsp is None or ts is None:
                    skipped += 1
                    continue
                events.append((ts, row[0], kind, rsp))
        if not events:
            raise UserError("gdbtrace latency: no frames from the %s tracepoints yet (tracepoints %s); run "
                            "tstart, let %s run, tstop, then try again" % (
                                name, ", ".join(str(n) for n in sorted(entry_tps | ret_tps)), name))
        result = latency.pair_calls(events)
        if not result.durations:
            raise UserError("gdbtrace latency: %d frames but no complete call of %s (entries without "
                            "returns: %d, returns without entries: %d)" % (
                                len(events), name, result.open_entries, result.unmatched_returns))
        durations = [d for _s, d, _k in result.durations]
        gdb.write("Latency of %s: %d calls (microseconds, from $trace_timestamp at entry and ret)\n" % (
            name, len(durations)))
        gdb.write(stats.summary_table([(name, stats.Summary(durations))], unit=" us") + "\n")
        notes = []
        if result.open_entries:
            notes.append("%d entries without a return (still running or frame dropped)" % result.open_entries)
        if result.unmatched_returns:
            notes.append("%d returns without an entry (call began before the trace)" % result.unmatched_returns)
        if skipped:
            notes.append("%d frames without $rsp/$trace_timestamp skipped" % skipped)
        if notes:
            gdb.write("(" + "; ".join(notes) + ")\n")
        gdb.write("\nHistogram:\n%s\n" % stats.ascii_histogram(durations, unit=" us"))


# ---------------------------------------------------------------------------------------------
# live


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
        _wrap(lambda: self._start(opts))

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


# ---------------------------------------------------------------------------------------------
# stacks / flamegraph


def _parse_stack_args(arg, usage, options):
    """(tracepoint number or None, {option: value}); OPTIONS: {"-top": int, "-folded": str, "-all": bool}."""
    args = gdb.string_to_argv(arg)
    tp, opts = None, {}
    i = 0
    while i < len(args):
        a = args[i]
        if a in options and options[a] is bool:
            opts[a] = True
        elif a in options:
            if i + 1 >= len(args):
                raise UserError("usage: " + usage)
            try:
                opts[a] = options[a](args[i + 1])
            except ValueError:
                raise UserError("usage: " + usage)
            i += 1
        elif tp is None and a.isdigit():
            tp = int(a)
        else:
            raise UserError("usage: " + usage)
        i += 1
    return tp, opts


def count_stacks(tp=None, full=False):
    """StackCounts over the frames of the stub's buffer (of tracepoint TP, gdb's number)."""
    from . import stacks as stacks_mod

    stub = current_stub()
    check_gdbtrace(stub)
    tp_map = tracepoint_map(stub, tracepoint_defs()) if tp is not None else {}
    counts = stacks_mod.StackCounts(full=full)
    symbolizer = _symbolizer()
    try:
        for stack in stacks_mod.parse_lines(stub.iter_stacks(), symbolizer):
            if tp is None or tp_map.get(stack.tp, stack.tp) == tp:
                counts.add(stack)
    except ValueError as e:
        raise StubError("qGdbtrace.stacks: %s" % e)
    finally:
        if symbolizer:
            symbolizer.close()
    if symbolizer:
        counts.notes = [note for _, note in sorted(symbolizer.notes.items())]
    return counts


def _demangle(name):
    if not name.startswith("_Z"):
        return name
    try:
        return gdb.execute("demangle -l c++ -- %s" % name, to_string=True).strip() or name
    except gdb.error:
        return name


def _symbolizer():
    """Names for the frames the stub has no symbols for: debuginfod, when DEBUGINFOD_URLS is
    set in gdb's environment (docs/stacks.md), else None."""
    from . import debuginfod

    return debuginfod.from_environment(_demangle)


def _stack_table():
    """Every frame's stack for `gdbtrace export perfetto` when the stub records stacks
    (`monitor gdbtrace stacks on`), else None."""
    from . import stacks as stacks_mod

    stub = current_stub()
    if isinstance(stub, TfileSource) or not check_gdbtrace(stub).get("stacks"):
        return None
    table = stacks_mod.StackTable()
    symbolizer = _symbolizer()
    try:
        for stack in stacks_mod.parse_lines(stub.iter_stacks(), symbolizer):
            table.add(stack)
    except ValueError as e:
        raise StubError("qGdbtrace.stacks: %s" % e)
    finally:
        if symbolizer:
            symbolizer.close()
    return table


def _write_folded(path, counts):
    with open(path + ".part", "w") as f:
        for line in counts.folded_lines():
            f.write(line + "\n")
    os.replace(path + ".part", path)


class StacksCommand(gdb.Command):
    """Most frequent call paths at the tracepoints' hits, from the stacks the stub unwinds.

Usage: gdbtrace stacks [TP] [-top N] [-folded FILE] [-all]
  TP          only frames of tracepoint TP
  -top N      show the N most frequent paths (default 10), with counts and shares
  -folded F   also write every path as a folded-stack file (`main;path_a;common;leaf 300`,
              one line per distinct path, the format flame graph tools read)
  -all        keep the callers of main (the C runtime's start code)
Needs `monitor gdbtrace stacks on` before tstart: each hit then records the registers and a
stack snapshot, which gdbtrace-server unwinds with the modules' DWARF CFI (libdw). A stack the
snapshot cannot hold entirely starts with [truncated]. A frame no symbol names is
module+0xOFFSET (an ELF address of the module: `eu-addr2line -e FILE 0xOFFSET` names it), and
the output says which modules had no symbols, with their build-ids; with DEBUGINFOD_URLS set,
their names are fetched from debuginfod by build-id."""

    USAGE = "gdbtrace stacks [TP] [-top N] [-folded FILE] [-all]"

    def __init__(self):
        super().__init__("gdbtrace stacks", gdb.COMMAND_TRACEPOINTS, gdb.COMPLETE_FILENAME)

    def invoke(self, arg, from_tty):
        from . import stacks as stacks_mod

        tp, opts = _parse_stack_args(arg, self.USAGE, {"-top": int, "-folded": str, "-all": bool})

        def body():
            counts = count_stacks(tp, full=opts.get("-all", False))
            label = "" if tp is None else " of tracepoint %d" % tp
            gdb.write(stacks_mod.format_top(counts, opts.get("-top", 10), label))
            if "-folded" in opts:
                path = os.path.expanduser(opts["-folded"])
                _write_folded(path, counts)
                gdb.write("Wrote %d call paths (%d frames) to %s.\n" % (
                    len(counts.paths), counts.with_stacks, path))

        _wrap(body)


class FlamegraphCommand(gdb.Command):
    """Draw the call stacks at the tracepoints' hits as an interactive flame graph (SVG).

Usage: gdbtrace flamegraph FILE.svg [TP] [-folded IN] [-all]
  TP          only frames of tracepoint TP
  -folded IN  draw a folded-stack file instead of the stub's frames
  -all        keep the callers of main
The SVG is self-contained (open it in a browser: hover for counts, click to zoom)."""

    USAGE = "gdbtrace flamegraph FILE.svg [TP] [-folded IN] [-all]"

    def __init__(self):
        super().__init__("gdbtrace flamegraph", gdb.COMMAND_TRACEPOINTS, gdb.COMPLETE_FILENAME)

    def invoke(self, arg, from_tty):
        from . import flamegraph, stacks as stacks_mod

        argv = gdb.string_to_argv(arg)
        if not argv or argv[0].startswith("-"):
            raise UserError("usage: " + self.USAGE)
        path = os.path.expanduser(argv[0])
        tp, opts = _parse_stack_args(" ".join(shlex.quote(a) for a in argv[1:]), self.USAGE,
                                     {"-folded": str, "-all": bool})

        def body():
            if "-folded" in opts:
                paths = stacks_mod.read_folded(os.path.expanduser(opts["-folded"]))
                title = "Flame graph of %s" % os.path.basename(opts["-folded"])
            else:
                counts = count_stacks(tp, full=opts.get("-all", False))
                if not counts.paths:
                    raise UserError("gdbtrace flamegraph: no frame has a stack (use `monitor gdbtrace "
                                    "stacks on` before tstart)")
                paths = [(list(p), n) for p, n in counts.paths.items()]
                for note in counts.notes + stacks_mod.format_unnamed(counts.unnamed):
                    gdb.write(note.strip() + "\n")
                title = "gdbtrace: %s%s" % (program_name() or "tracee",
                                            "" if tp is None else ", tracepoint %d" % tp)
            with open(path + ".part", "w") as f:
                f.write(flamegraph.render_svg(paths, title))
            os.replace(path + ".part", path)
            gdb.write("Wrote a flame graph of %d stacks to %s.\n" % (sum(n for _, n in paths), path))

        _wrap(body)


def register():
    GdbtracePrefix()
    StacksCommand()
    FlamegraphCommand()
    StatusCommand()
    LiveCommand()
    ExportCommand()
    StatsCommand()
    PlotCommand()
    LatencyCommand()
    functions.TraceFunctionsCommand()
