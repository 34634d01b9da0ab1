"""`gdbtrace latency`: entry and return tracepoints of a function, durations paired per call."""

import os
import re
import tempfile

import gdb

from . import decode, latency, stats
from .session import (TraceData, UserError, check_gdbtrace, current_stub, tracepoint_defs,
                      stub_errors_as_user_errors)



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
        stub_errors_as_user_errors(lambda: self._run(args[0]))

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
