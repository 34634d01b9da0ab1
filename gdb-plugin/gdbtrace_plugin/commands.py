"""The `gdbtrace` prefix command and the registration of every `gdbtrace` subcommand; each command
family lives in its own module (status_command, export_command, stats_commands, latency_command,
live_command, stacks_commands, open_command; functions for trace-functions)."""

import gdb

from . import functions
from .export_command import ExportCommand
from .latency_command import LatencyCommand
from .live_command import LiveCommand
from .open_command import OpenCommand
from .stacks_commands import FlamegraphCommand, StacksCommand
from .stats_commands import PlotCommand, StatsCommand
from .status_command import StatusCommand


class GdbtracePrefix(gdb.Command):
    """gdbtrace: views, exports and statistics of gdbtrace-server trace frames.

Frames are fetched in bulk (qGdbtrace.frames) and decoded in Python with the
collected expressions' types; no tfind per frame."""

    def __init__(self):
        super().__init__("gdbtrace", gdb.COMMAND_TRACEPOINTS, gdb.COMPLETE_NONE, True)


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
    OpenCommand()
    functions.TraceFunctionsCommand()
