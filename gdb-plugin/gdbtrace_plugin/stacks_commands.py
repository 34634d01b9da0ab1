"""`gdbtrace stacks` and `gdbtrace flamegraph`: the call stacks the stub unwinds at the hits."""

import os
import shlex

import gdb

from .session import (UserError, check_gdbtrace, current_stub, program_name, tracepoint_defs, tracepoint_map,
                      stub_errors_as_user_errors)
from .transport import StubError, TfileSource



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

    def add(stack):
        if tp is None or tp_map.get(stack.tp, stack.tp) == tp:
            counts.add(stack)

    notes = _each_stack(stub, add)
    if notes is not None:
        counts.notes = notes
    return counts


def _each_stack(stub, add):
    """Calls ADD with every stack the stub recorded, symbolized where the stub had no names;
    returns the symbolizer's notes (None without a symbolizer)."""
    from . import stacks as stacks_mod

    symbolizer = _symbolizer()
    try:
        for stack in stacks_mod.parse_lines(stub.iter_stacks(), symbolizer):
            add(stack)
    except ValueError as e:
        raise StubError("qGdbtrace.stacks: %s" % e)
    finally:
        if symbolizer:
            symbolizer.close()
    return [note for _, note in sorted(symbolizer.notes.items())] if symbolizer else None


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


def stack_table():
    """Every frame's stack for `gdbtrace export perfetto` when the stub records stacks
    (`monitor gdbtrace stacks on`), else None."""
    from . import stacks as stacks_mod

    stub = current_stub()
    if isinstance(stub, TfileSource) or not check_gdbtrace(stub).get("stacks"):
        return None
    table = stacks_mod.StackTable()
    _each_stack(stub, table.add)
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

        stub_errors_as_user_errors(body)


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

        stub_errors_as_user_errors(body)
