"""`gdbtrace stats` and `gdbtrace plot`: a collected expression's values over all trace frames."""

import os
import re
import shlex

import gdb

from . import stats
from .session import TraceData, UserError, stub_errors_as_user_errors



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
            if data.markers_note():
                gdb.write("Not in these statistics: %s.\n" % data.markers_note())
        stub_errors_as_user_errors(body)


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
        stub_errors_as_user_errors(body)
