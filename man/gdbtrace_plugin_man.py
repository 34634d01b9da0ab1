"""Writes gdbtrace(7), the man page of the plugin's gdb commands, from gdb's own `help` text.

Run by the build inside gdb with the plugin loaded, so the page is the commands' docstrings and
cannot drift from what `help gdbtrace ...` prints:
    GDBTRACE_MAN_OUT=gdbtrace.7 GDBTRACE_VERSION=x.y.z \
        gdb -nx -batch -x gdb-plugin/gdbtrace.py -x man/gdbtrace_plugin_man.py
"""

import os
import re

import gdb

INSTALL_TEXT = r"""
.SH LOADING
The
.B gdbtrace
package installs a hook in gdb's data directory
.RI ( /usr/share/gdb/python/gdb/command/gdbtrace_autoload.py ),
so every gdb has these commands. With another installation prefix, run
.I PREFIX/share/gdbtrace/install.sh
(adds a
.B source
line to
.IR ~/.gdbinit )
or
.I PREFIX/share/gdbtrace/install.sh \-\-system
(copies the plugin into gdb's data directory), or type
.B source PREFIX/share/gdbtrace/gdbtrace.py
in gdb.
.SH SEE ALSO
.BR gdbtrace-server (1),
.BR gdb (1).
.PP
.I /usr/share/doc/gdbtrace/plugin.md
"""


def roff_escape(line: str) -> str:
    """Text as roff shows it literally: backslashes doubled, no line read as a request."""
    line = line.replace("\\", "\\e").replace("-", "\\-")
    if line.startswith((".", "'")):
        line = "\\&" + line
    return line


def help_text(command: str) -> str:
    return gdb.execute(f"help {command}", to_string=True)


def subcommands(prefix_help: str) -> list:
    return re.findall(r"^(gdbtrace \S+) -- ", prefix_help, re.MULTILINE)


def literal_block(text: str) -> list:
    lines = [".nf"] + [roff_escape(line) for line in text.rstrip().splitlines()] + [".fi"]
    return lines


def page() -> str:
    version = os.environ.get("GDBTRACE_VERSION", "")
    prefix_help = help_text("gdbtrace")
    overview = prefix_help.split("List of gdbtrace subcommands:")[0].strip()
    summary, _, details = overview.partition("\n")
    out = [
        f'.TH GDBTRACE 7 "" "gdbtrace {version}" "gdbtrace"',
        ".SH NAME",
        "gdbtrace \\- GDB commands for trace frames collected by gdbtrace\\-server",
        ".SH DESCRIPTION",
        roff_escape(summary.split(":", 1)[-1].strip().capitalize()),
        ".PP",
    ]
    out += literal_block(details.strip())
    out += [".SH COMMANDS"]
    for command in subcommands(prefix_help):
        out += [".SS " + roff_escape(command)]
        out += literal_block(help_text(command))
    return "\n".join(out) + INSTALL_TEXT


def main():
    target = os.environ["GDBTRACE_MAN_OUT"]
    text = page()
    if len(subcommands(help_text("gdbtrace"))) == 0:
        raise gdb.GdbError("no `gdbtrace ...` commands registered: is the plugin loaded?")
    with open(target, "w", encoding="utf-8") as f:
        f.write(text)


main()
