"""gdbtrace plugin for GDB: `source gdb-plugin/gdbtrace.py`, then `help gdbtrace`.

Views, exports and statistics of trace frames collected by gdbtrace-server.
The implementation lives in the gdbtrace_plugin package next to this file.
"""

import os
import sys

import gdb

_here = os.path.dirname(os.path.abspath(__file__))
if _here not in sys.path:
    sys.path.insert(0, _here)

if "gdbtrace_plugin.commands" not in sys.modules:
    from gdbtrace_plugin import commands as _commands

    _commands.register()
