"""Call stacks of trace frames (no gdb import): parsing the stub's
qGdbtrace.stacks lines, counting call paths, the folded-stack format flame
graph tools read, and the per-frame stacks other exports attach.

Lines, as gdbtrace-server sends them (numbers hex):
  M<id> <build-id>;<symbols>;<path>           a module (before the first S line naming it)
  S<pc> <function>;<module>;<file:line>;<module id>;<offset>
                                              names of a pc (before the first F line using it)
  F<frame> T<tracepoint> <status>[:<error>] {TAB <pc>}
innermost frame first; status is ok, truncated, nostack or error. symbols is full, dynamic
(only .dynsym), none or unreadable (no offsets then); offset is the pc looked up (a return
address - 1) in the module's own ELF addresses, empty when unknown. A pc no symbol names is
shown as module+0xOFFSET, which addr2line / eu-addr2line / llvm-symbolizer resolve on the
unstripped file (docs/stacks.md).
"""

import collections
import os

TRUNCATED = "[truncated]"
UNWIND_ERROR = "[unwind error]"


class Module:
    """An ELF file the stacks went through, as the stub saw it mapped."""

    __slots__ = ("path", "build_id", "symbols")

    def __init__(self, path, build_id, symbols):
        self.path, self.build_id, self.symbols = path, build_id, symbols

    @property
    def name(self):
        return os.path.basename(self.path)

    def as_json(self):
        return {"name": self.name, "path": self.path, "build_id": self.build_id, "symbols": self.symbols}


class Stack:
    __slots__ = ("frame", "tp", "status", "error", "entries")

    def __init__(self, frame, tp, status, error, entries):
        self.frame, self.tp, self.status, self.error, self.entries = frame, tp, status, error, entries

    def names(self, full=False):
        """Function names, outermost first. Unless FULL, callers of `main` (the C
        runtime's start code) are left out. A stack that did not reach its
        outermost frame starts with [truncated] (or [unwind error]): what is
        missing is said, never guessed."""
        names = [entry_name(e) for e in reversed(self.entries)]
        if not full and self.status == "ok" and "main" in names:
            names = names[names.index("main"):]
        if self.status == "truncated":
            names.insert(0, TRUNCATED)
        elif self.status == "error":
            names.insert(0, UNWIND_ERROR)
        return names


def entry_name(entry):
    """One frame's name: the function, else module+0xOFFSET (the module's ELF address),
    else module@0xPC (the module's file could not be read), else the bare pc."""
    pc, function, module, _source, _mod, offset = entry
    if function:
        return function
    if module and offset is not None:
        return "%s+0x%x" % (module, offset)
    return "%s@0x%x" % (module, pc) if module else "0x%x" % pc


def parse_stack_line(line, symbols):
    """A Stack from an F line; SYMBOLS: {pc: (function, module, source, Module, offset)}
    from the S lines."""
    fields = line.split("\t")
    head = fields[0].split(" ", 2)
    if len(head) != 3 or not head[0].startswith("F") or not head[1].startswith("T"):
        raise ValueError("malformed stack line %r" % line[:80])
    status, _, error = head[2].partition(":")
    entries = []
    for f in fields[1:]:
        pc = int(f, 16)
        names = symbols.get(pc)
        if names is None:
            raise ValueError("pc %s of frame %s has no S line" % (f, head[0][1:]))
        entries.append((pc,) + names)
    return Stack(int(head[0][1:], 16), int(head[1][1:], 16), status, error, entries)


def parse_module_line(line, modules):
    mid, _, rest = line[1:].partition(" ")
    parts = rest.split(";", 2)
    if len(parts) != 3:
        raise ValueError("malformed module line %r" % line[:80])
    build_id, symbols, path = parts
    modules[int(mid, 16)] = Module(path, build_id, symbols)


def parse_symbol_line(line, symbols, modules, symbolizer=None):
    """S line -> SYMBOLS[pc]. The module id and offset are optional (left out: unknown).
    SYMBOLIZER(Module, offset) names a pc the stub found no symbol for, or returns None."""
    pc, _, rest = line[1:].partition(" ")
    parts = rest.split(";", 4)
    if len(parts) < 3:
        raise ValueError("malformed symbol line %r" % line[:80])
    function, module, source = parts[:3]
    mid, offset = (parts + ["", ""])[3:5]
    mod = None
    if mid:
        mod = modules.get(int(mid, 16))
        if mod is None:
            raise ValueError("module %s of pc %s has no M line" % (mid, pc))
    offset = int(offset, 16) if offset else None
    # A module with a full .symtab gains no function names from its debug info: not fetched.
    if not function and mod is not None and offset is not None and symbolizer is not None \
            and mod.symbols != "full":
        function = symbolizer(mod, offset) or ""
    symbols[int(pc, 16)] = (function, module, source, mod, offset)


def parse_lines(lines, symbolizer=None):
    """Stacks from the stub's lines (M, S and F, in order); SYMBOLIZER: see parse_symbol_line."""
    symbols, modules = {}, {}
    for line in lines:
        if line.startswith("S"):
            parse_symbol_line(line, symbols, modules, symbolizer)
        elif line.startswith("M"):
            parse_module_line(line, modules)
        else:
            yield parse_stack_line(line, symbols)


def unnamed_modules(stack, into):
    """Adds to INTO {path: Module} each module of STACK with a frame no symbol named."""
    for _pc, function, _module, _source, mod, _offset in stack.entries:
        if not function and mod is not None:
            into[mod.path] = mod


class StackCounts:
    """Call paths (outermost first) counted over frames."""

    def __init__(self, full=False):
        self.full = full
        self.paths = collections.Counter()
        self.frames = 0
        self.by_status = collections.Counter()
        self.unnamed = {}  # path -> Module with frames shown as module+0xOFFSET
        self.notes = []  # more lines about names (debuginfod.DebuginfodSymbolizer.notes)

    def add(self, stack):
        self.frames += 1
        self.by_status[stack.status] += 1
        if stack.status == "nostack":
            return
        path = tuple(stack.names(self.full))
        if path not in self.paths:  # the same names come from the same modules
            unnamed_modules(stack, self.unnamed)
        self.paths[path] += 1

    @property
    def with_stacks(self):
        return sum(self.paths.values())

    def folded_lines(self):
        """`main;path_a;common;leaf 300`, one line per distinct path, most frequent first."""
        return ["%s %d" % (";".join(p), n) for p, n in
                sorted(self.paths.items(), key=lambda kv: (-kv[1], kv[0]))]

    def top(self, n):
        total = self.with_stacks or 1
        return [(count, 100.0 * count / total, path)
                for path, count in sorted(self.paths.items(), key=lambda kv: (-kv[1], kv[0]))[:n]]


def format_top(counts, n, tp_label=""):
    lines = []
    total = counts.with_stacks
    lines.append("%d frames%s, %d with a stack, %d distinct call paths" % (
        counts.frames, tp_label, total, len(counts.paths)))
    notes = []
    for status in ("truncated", "error", "nostack"):
        if counts.by_status.get(status):
            notes.append("%d %s" % (counts.by_status[status], {
                "truncated": "truncated (the stack was deeper than the snapshot)",
                "error": "not unwound (no CFI for a pc)",
                "nostack": "without a stack snapshot (monitor gdbtrace stacks on, then tstart)",
            }[status]))
    if notes:
        lines.append("  " + "; ".join(notes))
    lines.extend("  " + note for note in counts.notes)
    lines.extend(format_unnamed(counts.unnamed))
    for count, share, path in counts.top(n):
        lines.append("%8d  %5.1f%%  %s" % (count, share, " <- ".join(reversed(path))))
    return "\n".join(lines) + "\n"


def format_unnamed(modules):
    """What the output must say about modules whose frames have no name: which they are and
    how to name them later (build-id for debuginfod, the ELF address for addr2line)."""
    lines = []
    for path, mod in sorted(modules.items()):
        if mod.symbols == "unreadable":
            lines.append("  module %s could not be read by the stub (deleted or replaced since it was "
                         "mapped): frames in it are %s@0xPC, runtime addresses" % (path, mod.name))
            continue
        what = {"none": "has no symbols", "dynamic": "has only dynamic symbols (stripped)"}.get(
            mod.symbols, "has symbols that do not cover every frame")
        lines.append("  module %s %s: frames in it are %s+0xOFFSET (ELF address; "
                     "eu-addr2line -e FILE 0xOFFSET), build-id %s" % (
                         path, what, mod.name, mod.build_id or "none"))
    return lines


def read_folded(path):
    """[(frames outermost first, count)] from a folded-stack file."""
    out = []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            stack, _, count = line.rpartition(" ")
            out.append((stack.split(";"), int(count)))
    return out


class StackTable:
    """Stacks of many frames as a tree of ids (Trace Event Format "stackFrames": each node
    {name, parent}), with each frame's leaf node: what `gdbtrace export perfetto` attaches."""

    def __init__(self):
        self.nodes = []  # (name, parent id or None); id = index
        self._ids = {}  # (parent id, name) -> id
        self.by_frame = {}  # frame index -> (leaf node id, "main;...;leaf")
        self.modules = {}  # path -> Module, every module a stack went through

    def add(self, stack, full=False):
        if stack.status == "nostack":
            return
        for _pc, _function, _module, _source, mod, _offset in stack.entries:
            if mod is not None:
                self.modules.setdefault(mod.path, mod)
        parent = None
        names = stack.names(full)
        for name in names:
            key = (parent, name)
            node = self._ids.get(key)
            if node is None:
                node = self._ids[key] = len(self.nodes)
                self.nodes.append((name, parent))
            parent = node
        if parent is not None:
            self.by_frame[stack.frame] = (parent, ";".join(names))
