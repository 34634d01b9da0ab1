"""`gdbtrace open FILE`: `target tfile FILE` with a position-independent program's symbols moved
to where the trace found it (relocate.py says why gdb needs that)."""

import gdb

from . import relocate
from .session import UserError
from .transport import StubError, TfileSource


def _function_ranges(text):
    """Link-time [start, end) of each function the location TEXT names in the loaded symbols."""
    try:
        _rest, sals = gdb.decode_line(text)
    except gdb.error:
        return []
    ranges = []
    for sal in sals or ():
        block = gdb.block_for_pc(sal.pc) if sal.pc else None
        while block is not None and block.function is None:
            block = block.superblock
        if block is not None:
            ranges.append((block.start, block.end))
    return ranges


def _quietly(command):
    """Runs COMMAND with gdb's confirmation queries off (symbol-file asks before replacing)."""
    confirm = gdb.parameter("confirm")
    gdb.execute("set confirm off", to_string=True)
    try:
        return gdb.execute(command, to_string=True)
    finally:
        gdb.execute("set confirm %s" % ("on" if confirm else "off"), to_string=True)


def open_trace(path):
    try:
        source = TfileSource(path)
    except (OSError, StubError) as e:
        raise UserError("gdbtrace open: %s" % e)
    specs = relocate.location_specs(source.upload_tracepoints())
    source.close()
    program = gdb.current_progspace().filename
    if program and relocate.is_position_independent(program) and specs:
        # Link-time symbols first: the bias is measured from them, whatever an earlier run or
        # `gdbtrace open` relocated them by.
        _quietly("symbol-file %s" % program)
        bias, why = relocate.load_bias(specs, _function_ranges)
        if bias is None:
            raise UserError("gdbtrace open: %s is position-independent, but where it was loaded cannot "
                            "be told: %s; use `symbol-file -o OFFSET %s` and `target tfile %s`"
                            % (program, why, program, path))
        if bias:
            _quietly("symbol-file -o 0x%x %s" % (bias, program))
            gdb.write("gdbtrace: %s is position-independent: its symbols are moved to 0x%x, where the "
                      "trace found it\n" % (program, bias))
    gdb.execute("target tfile %s" % path)


class OpenCommand(gdb.Command):
    """Open a trace file (tsave, tsave -r, or a `monitor gdbtrace stream` file).

Usage: gdbtrace open FILE

As `target tfile FILE`, but first moves the symbols of a position-independent
program (PIE: Debian's default) to the address the trace was taken at, read
from the file's tracepoint locations. Under a plain `target tfile` gdb reads a
PIE program's trace at its link-time addresses: tracepoints do not match and
locals read "No symbol ... in current context". Load the program the trace
was taken from first (`file PROG`)."""

    def __init__(self):
        super().__init__("gdbtrace open", gdb.COMMAND_TRACEPOINTS, gdb.COMPLETE_FILENAME)

    def invoke(self, arg, from_tty):
        args = gdb.string_to_argv(arg)
        if len(args) != 1:
            raise UserError("usage: gdbtrace open FILE")
        open_trace(args[0])
