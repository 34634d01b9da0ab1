"""`gdbtrace trace-functions`: one tracepoint per function matching a regex (the way uftrace -F or
bpftrace's uprobe:LIB:PATTERN trace a whole library), made with gdb's own `trace *ADDR`, so `info
tracepoints`, `tstart`, `tfind` and `tsave` see ordinary tracepoints. Also the per-function hit
counts `gdbtrace status` shows (top_functions)."""

import os
import re
import tempfile

import gdb

from .session import UserError

USAGE = "usage: gdbtrace trace-functions REGEX [in MODULE] [-collect EXPRS]"


def parse_args(arg):
    """(regex, module or None, collect text or None) from `REGEX [in MODULE] [-collect EXPRS]`.
    EXPRS is the rest of the line, as gdb's `collect` takes it (commas, spaces)."""
    collect = None
    m = re.search(r"(?:^|\s)-collect(?:\s+(.*))?$", arg)
    if m:
        collect = (m.group(1) or "").strip()
        if not collect:
            raise UserError("gdbtrace trace-functions: -collect needs expressions\n" + USAGE)
        arg = arg[:m.start()]
    words = arg.split()
    module = None
    if len(words) >= 2 and words[-2] == "in":
        module = words[-1]
        words = words[:-2]
    if len(words) != 1:
        raise UserError(USAGE)
    try:
        re.compile(words[0])
    except re.error as e:
        raise UserError("gdbtrace trace-functions: bad regex %r: %s" % (words[0], e))
    return words[0], module, collect


def parse_msymbols(text):
    """[(object file, name, address)] of the function symbols in `maint print msymbols` output
    (`Object file PATH:` headers, then `[ N] T 0xADDR NAME section .text ...` rows, addresses as
    the process maps them). Text symbols only (T, t); not ifuncs (i: the address is the resolver's)
    nor PLT stubs (a call through one reaches the function itself)."""
    found, objfile = [], None
    for line in text.splitlines():
        if line.startswith("Object file ") and line.endswith(":"):
            objfile = line[len("Object file "):-1]
            continue
        m = re.match(r"\[\s*\d+\]\s+([Tt])\s+(0x[0-9a-f]+)\s+(\S+)\s+section\s+(\S+)", line)
        if not m or objfile is None:
            continue
        kind, address, name, section = m.groups()
        if "@plt" in name or section.startswith(".plt"):
            continue
        found.append((objfile, name, int(address, 16)))
    return found


def module_matches(path, module):
    """MODULE names an object file by its base name (`libc.so.6`), a prefix of it (`libc`) or its
    path."""
    if module is None:
        return True
    base = os.path.basename(path)
    return path == module or base == module or base.startswith(module + ".") or \
        base.startswith(module + "-") or os.path.realpath(path) == os.path.realpath(module)


def function_entries(regex, module):
    """{address: (name, object file)} of every function symbol of the live process whose name
    REGEX matches (re.search, as `info functions REGEX`), in the object files MODULE names. From
    the ELF symbol tables gdb read (its minimal symbols: one pass, milliseconds for 10 000, where a
    debug-info lookup per function takes a millisecond each); one entry per address (aliases)."""
    pattern = re.compile(regex)
    text = gdb.execute("maint print msymbols", to_string=True)
    entries = {}
    # A separate debug file (/usr/lib/debug/...) repeats its object's symbols: the object's own
    # name wins.
    symbols = sorted(parse_msymbols(text), key=lambda s: s[0].endswith(".debug"))
    for objfile, name, address in symbols:
        if pattern.search(name) and module_matches(objfile, module):
            entries.setdefault(address, (name, os.path.basename(objfile)))
    return entries


def define_tracepoints(addresses, collect):
    """`trace *ADDR` (+ `collect`) for each address, from one sourced script (10 000 gdb.execute
    calls with their own actions scripts take minutes). Returns the new tracepoint numbers, read
    from gdb's `Tracepoint N at` lines (gdb 13's gdb.breakpoints() leaves tracepoints out)."""
    lines = []
    for address in addresses:
        lines.append("trace *0x%x" % address)
        if collect:
            lines += ["actions", "collect %s" % collect, "end"]
    with tempfile.NamedTemporaryFile("w", suffix=".gdb", delete=False) as f:
        f.write("\n".join(lines) + "\n")
        path = f.name
    try:
        out = gdb.execute("source %s" % path, to_string=True)
    finally:
        os.unlink(path)
    return [int(n) for n in re.findall(r"^Tracepoint (\d+) at", out, re.MULTILINE)]


class TraceFunctionsCommand(gdb.Command):
    """Define one tracepoint at the entry of every function whose name matches REGEX.

Usage: gdbtrace trace-functions REGEX [in MODULE] [-collect EXPRS]

REGEX is searched for in the names of the function symbols of every loaded object
(Python re.search, not anchored: `^many_` for a prefix; one tracepoint per address,
PLT stubs and ifunc resolvers left out). MODULE restricts it to one loaded object:
its file name (libc.so.6), a prefix of it (libc) or its path. Each function gets
`trace *ADDR` at its first instruction (as uftrace and bpftrace probe a function), with
`collect EXPRS` when given (e.g. -collect $regs, or -collect $args for each
function's own arguments); without it a hit records only which function ran, when.
The program must be running (addresses are the process's). Then tstart as usual;
`gdbtrace status` shows the functions with the most hits."""

    def __init__(self):
        super().__init__("gdbtrace trace-functions", gdb.COMMAND_TRACEPOINTS, gdb.COMPLETE_SYMBOL)

    def invoke(self, arg, from_tty):
        regex, module, collect = parse_args(arg)
        if gdb.selected_inferior().pid == 0:
            raise UserError("gdbtrace trace-functions: the program is not running (start it first: "
                            "the tracepoints go at the process's function addresses)")
        chosen = function_entries(regex, module)
        if not chosen:
            raise UserError("gdbtrace trace-functions: no function matches %r%s" % (
                regex, " in %s" % module if module else ""))
        numbers = define_tracepoints(sorted(chosen), collect)
        if len(numbers) != len(chosen):
            raise UserError("gdbtrace trace-functions: gdb made %d of %d tracepoints (see `info "
                            "tracepoints`)" % (len(numbers), len(chosen)))
        modules = {}
        for name, mod in chosen.values():
            modules[mod] = modules.get(mod, 0) + 1
        where = ", ".join("%d in %s" % (n, mod) for mod, n in sorted(modules.items(), key=lambda kv: -kv[1]))
        gdb.write("Defined %d tracepoints (%s) on functions matching %r: %s%s.\n" % (
            len(numbers), "%d-%d" % (numbers[0], numbers[-1]) if len(numbers) > 1 else str(numbers[0]),
            regex, where, "; collecting %s" % collect if collect else ""))


def top_functions(tracepoints, symbolize, limit):
    """[(function, hits, locations)] of the LIMIT functions with the most hits, from the status
    JSON's per-location rows; locations in one function (entry and returns) add up. SYMBOLIZE maps
    an address to a function name (None: shown as the address)."""
    by_function = {}
    for t in tracepoints:
        hits = t.get("hits") or 0
        address = t.get("address")
        address = int(address, 16) if isinstance(address, str) else address
        if address is None:
            continue
        by_function.setdefault(address, 0)
        by_function[address] += hits
    # Only the busiest addresses are symbolized (thousands of lookups would be slow); an address
    # costs one lookup, then addresses of one function are merged.
    ranked = sorted(by_function.items(), key=lambda kv: (-kv[1], kv[0]))
    merged, order = {}, []
    for address, hits in ranked:
        if len(order) >= limit and hits == 0:
            break
        name = symbolize(address) or "0x%x" % address
        if name not in merged:
            merged[name] = [0, 0]
            order.append(name)
        merged[name][0] += hits
        merged[name][1] += 1
        if len(order) > limit * 4:
            break
    rows = sorted(((n, merged[n][0], merged[n][1]) for n in order), key=lambda r: (-r[1], r[0]))
    return rows[:limit]


def symbolize(address):
    """The function at ADDRESS (debug info, else the ELF symbol), or None."""
    try:
        block = gdb.block_for_pc(address)
    except RuntimeError:
        block = None
    while block is not None and block.function is None:
        block = block.superblock
    if block is not None:
        return block.function.print_name
    try:
        out = gdb.execute("info symbol 0x%x" % address, to_string=True)
    except gdb.error:
        return None
    m = re.match(r"(\S+)( \+ \d+)? in section", out)
    return m.group(1) if m and not m.group(2) else None


def format_top_functions(tracepoints, limit, symbolizer=symbolize):
    """The `Top functions by hits` lines of `gdbtrace status` ([] for fewer than 2 locations)."""
    if len(tracepoints) < 2 or limit <= 0:
        return []
    rows = top_functions(tracepoints, symbolizer, limit)
    total = sum((t.get("hits") or 0) for t in tracepoints)
    lines = ["Top %d functions by hits (of %d tracepoint locations, %d hits):" % (
        len(rows), len(tracepoints), total)]
    width = max(len(r[0]) for r in rows) if rows else 8
    for name, hits, locations in rows:
        share = " (%.1f%%)" % (100.0 * hits / total) if total else ""
        lines.append("  %s  %d%s%s" % (name.ljust(width), hits, share,
                                         "  [%d locations]" % locations if locations > 1 else ""))
    return lines
