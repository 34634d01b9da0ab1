"""Loads the gdbtrace plugin into every gdb: gdb imports each module in its
<data-directory>/python/gdb/command/ at start-up, and this file is installed there.

The plugin package (gdbtrace_plugin/) is looked for next to this file (where
`install.sh --system` copies it), then in PREFIX/share/gdbtrace/ when this file is
PREFIX/share/gdb/python/gdb/command/gdbtrace_autoload.py (the layout `cmake --install`
and the Debian package create), so the hook works under any installation prefix.
"""

import os
import sys


def _plugin_dir():
    here = os.path.dirname(os.path.abspath(__file__))
    share = os.path.normpath(os.path.join(here, "..", "..", "..", ".."))
    for candidate in (here, os.path.join(share, "gdbtrace")):
        if os.path.isdir(os.path.join(candidate, "gdbtrace_plugin")):
            return candidate
    return None


_dir = _plugin_dir()
if _dir is None:
    print("gdbtrace: plugin package gdbtrace_plugin not found next to " + __file__)
else:
    if _dir not in sys.path:
        sys.path.insert(0, _dir)
    if "gdbtrace_plugin.commands" not in sys.modules:
        from gdbtrace_plugin import commands as _commands

        _commands.register()
