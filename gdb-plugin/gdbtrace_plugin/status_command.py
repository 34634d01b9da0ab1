"""`gdbtrace status`: the trace run per tracepoint location and collector, from qGdbtrace.status."""

import gdb

from . import functions
from .session import UserError, check_gdbtrace, current_stub, stub_errors_as_user_errors
from .transport import TfileSource



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
        stub_errors_as_user_errors(body)
