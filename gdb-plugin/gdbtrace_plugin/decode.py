"""Symbolic decoding of trace frames in Python, without one tfind per frame.

For each tracepoint location and collected expression EXPR the plugin learns,
once:
  * where EXPR lives in a frame: gdb compiles `&(EXPR)` at the tracepoint's
    address into agent bytecode (`maint agent-eval -at *ADDR, &(EXPR)`), the
    same location description gdb used to collect it (register + offset for
    locals/args, a constant for globals, memory reads for pointer chains);
    expressions without an address (registers, `$trace_timestamp`, `a + b`)
    compile to bytecode computing the value itself;
  * EXPR's type: from gdb in the tracepoint's first frame (`tfind tracepoint N`,
    then gdb.parse_and_eval(EXPR).type) or, while a run is in progress and
    frames cannot be selected, from the symbol tables.
Then every frame's 'R'/'M'/'V' blocks are decoded in Python: the bytecode is run
against the frame, the bytes at the address are read from its 'M' blocks and
turned into values per type (struct unpacking for scalars, gdb.Value for the
rest). Structs are flattened into one column per member.
"""

import re
import struct

import gdb

from . import ax
from . import regs as regs_mod
from .model import Column, Leaf, Plan

MAX_FLATTEN = 64  # struct/array leaves per expression before falling back to gdb's formatting

_INT_FORMATS = {(1, True): "<b", (1, False): "<B", (2, True): "<h", (2, False): "<H",
                (4, True): "<i", (4, False): "<I", (8, True): "<q", (8, False): "<Q"}
_POINTER_REGS = {"rip", "rsp", "rbp", "pc", "sp", "fp", "eflags", "fs_base", "gs_base"}


class DecodeError(Exception):
    pass


def leaves_for_type(name, gtype, offset=0, budget=None):
    """Flatten GTYPE into leaves named NAME, NAME.member, NAME[i]."""
    budget = budget if budget is not None else [MAX_FLATTEN]
    t = gtype.strip_typedefs()
    code = t.code
    size = t.sizeof
    if code in (gdb.TYPE_CODE_INT, gdb.TYPE_CODE_CHAR, gdb.TYPE_CODE_BOOL):
        signed = _is_signed(t)
        fmt = _INT_FORMATS.get((size, signed))
        return [Leaf(name, offset, size, "int", fmt, t)]
    if code == gdb.TYPE_CODE_ENUM:
        names = {f.enumval: f.name for f in t.fields()}
        fmt = _INT_FORMATS.get((size, _is_signed(t)))
        return [Leaf(name, offset, size, "enum", fmt, t, names)]
    if code == gdb.TYPE_CODE_FLT:
        fmt = {4: "<f", 8: "<d"}.get(size)
        return [Leaf(name, offset, size, "float", fmt, t)]
    if code in (gdb.TYPE_CODE_PTR, gdb.TYPE_CODE_FUNC) or code == getattr(gdb, "TYPE_CODE_FLAGS", -1):
        return [Leaf(name, offset, size, "ptr", _INT_FORMATS.get((size, False)), t)]
    if code == gdb.TYPE_CODE_ARRAY:
        target = t.target().strip_typedefs()
        if target.code == gdb.TYPE_CODE_CHAR or (target.code == gdb.TYPE_CODE_INT and target.sizeof == 1
                                                  and str(target).endswith("char")):
            return [Leaf(name, offset, size, "str", None, t)]
        count = size // target.sizeof if target.sizeof else 0
        if 0 < count <= budget[0] and target.code in (gdb.TYPE_CODE_INT, gdb.TYPE_CODE_FLT, gdb.TYPE_CODE_PTR,
                                                      gdb.TYPE_CODE_ENUM, gdb.TYPE_CODE_BOOL):
            out = []
            for i in range(count):
                out += leaves_for_type("%s[%d]" % (name, i), target, offset + i * target.sizeof, budget)
            budget[0] -= count
            return out
    if code == gdb.TYPE_CODE_STRUCT:
        fields = [f for f in t.fields() if not f.is_base_class and getattr(f, "bitsize", 0) == 0
                  and hasattr(f, "bitpos")]
        if 0 < len(fields) <= budget[0] and len(fields) == len(t.fields()):
            budget[0] -= len(fields)
            out = []
            for f in fields:
                member = "%s.%s" % (name, f.name) if f.name else name
                out += leaves_for_type(member, f.type, offset + f.bitpos // 8, budget)
            return out
    return [Leaf(name, offset, size, "gdb", None, gtype)]


def _is_signed(t):
    try:
        return bool(t.is_signed)
    except (AttributeError, ValueError):
        return True


class Scope:
    """Where gdb compiles expressions for one code address.

    With a trace frame at that address selected (`tfind pc ADDR`), gdb's current
    frame has exactly that pc: `maint agent-eval EXPR` compiles there and
    gdb.parse_and_eval gives types. Without one (a run in progress forbids
    tfind), `maint agent-eval -at LINESPEC, EXPR` compiles at the source line's
    address(es); the listing whose Scope is ADDRESS is used (else the first,
    flagged approximate), and types come from the symbol tables."""

    def __init__(self, address, linespec, framed):
        self.address = address
        self.linespec = linespec
        self.framed = framed
        self.approximate = False  # some register-relative location was compiled at another pc

    def agent_eval(self, expr):
        if self.framed:
            text = gdb.execute("maint agent-eval %s" % expr, to_string=True)
            return ax.parse_listing(text)
        if not self.linespec:
            raise gdb.error("no source location to compile `%s` at" % expr)
        text = gdb.execute("maint agent-eval -at %s, %s" % (self.linespec, expr), to_string=True)
        listings = [("Scope:" + part) for part in text.split("Scope:")[1:]]
        for listing in listings:
            m = re.match(r"Scope: (0x[0-9a-fA-F]+)", listing)
            if m and int(m.group(1), 16) == self.address:
                return ax.parse_listing(listing)
        if not listings:
            raise gdb.error("gdb produced no bytecode for `%s`" % expr)
        ops = ax.parse_listing(listings[0])
        if any(op.name == "reg" for op in ops):
            self.approximate = True
        return ops

    def type_of(self, expr):
        if self.framed:
            try:
                return gdb.parse_and_eval(expr).type
            except gdb.error:
                return None
        return static_type(expr, self.address)


def linespec_of(location):
    """FILE:LINE (or the function) of a tracepoint location from `info tracepoints`."""
    m = re.search(r" at (\S+:\d+)\s*$", " " + location.what)
    if m:
        return m.group(1)
    return location.function


_SIMPLE = re.compile(r"^\s*(\*?)\s*([A-Za-z_]\w*)((?:\s*(?:\.|->)\s*\w+|\s*\[\s*\d+\s*\])*)\s*$")


def static_type(expr, address):
    """Type of EXPR at ADDRESS from the symbol tables (no frame needed), or None.
    Handles `name`, `*name`, and member/index chains like `s.a[2]->b`."""
    m = _SIMPLE.match(expr)
    if not m:
        return None
    try:
        block = gdb.block_for_pc(address)
        sym = gdb.lookup_symbol(m.group(2), block)[0]
        if sym is None:
            return None
        t = sym.type
        for part in re.findall(r"\.\s*\w+|->\s*\w+|\[\s*\d+\s*\]", m.group(3)):
            if part.startswith("["):
                t = t.strip_typedefs().target()
            else:
                if part.startswith("->"):
                    t = t.strip_typedefs().target()
                field = part.lstrip(".->").strip()
                t = t.strip_typedefs()[field].type
        if m.group(1):
            t = t.strip_typedefs().target()
        return t
    except (gdb.error, KeyError, RuntimeError, ValueError):
        return None


def register_leaf(name):
    kind = "ptr" if name in _POINTER_REGS else "int"
    return Leaf("$" + name, 0, 8, kind, "<Q" if kind == "ptr" else "<q")


def expand_special(expr, address):
    """`$regs`, `$locals`, `$args` -> the expressions they stand for; other
    `$_...` collection keywords -> [] (nothing per-frame to show)."""
    e = expr.strip()
    if e == "$regs":
        return ["$" + r for r in regs_mod.EXPORTED]
    if e in ("$locals", "$args"):
        return block_symbols(address, want_args=(e == "$args"))
    if e.startswith("$_") and e in ("$_ret", "$_sdata", "$_probe_argc"):
        return []
    return [e]


def block_symbols(address, want_args):
    names, seen = [], set()
    try:
        block = gdb.block_for_pc(address)
    except RuntimeError:
        return names
    while block is not None and not block.is_global and not block.is_static:
        for sym in block:
            if sym.name in seen:
                continue
            if want_args and sym.is_argument:
                names.append(sym.name)
            elif not want_args and sym.is_variable and not sym.is_argument and sym.addr_class != gdb.SYMBOL_LOC_STATIC:
                names.append(sym.name)
            seen.add(sym.name)
        if block.function is not None:
            break
        block = block.superblock
    return names


def build_column(expr, scope):
    """Column for EXPR compiled in SCOPE."""
    reg = expr.strip()
    if reg.startswith("$") and reg[1:] in regs_mod.NUMBER:
        n = regs_mod.NUMBER[reg[1:]]
        if regs_mod.reg_size(n) == 8:
            return Column(expr, "value", ax.Program([ax.Op(0, "reg", n), ax.Op(3, "end", None)]), 8,
                          [register_leaf(reg[1:])])
    gtype = scope.type_of(expr)
    try:
        program = ax.Program(scope.agent_eval("&(%s)" % expr))
        if gtype is None:
            return Column(expr, "mem", program, 0, [], "type unknown (stop the trace run so that gdb can "
                          "select a trace frame, or collect a plain variable)")
        return Column(expr, "mem", program, gtype.sizeof, leaves_for_type(expr, gtype))
    except gdb.error as e:
        address_error = str(e)
    except ax.AxError as e:
        return Column(expr, "mem", None, 0, [], str(e))
    try:
        program = ax.Program(scope.agent_eval(expr))
    except (gdb.error, ax.AxError) as e:
        message = address_error if str(e) == address_error else "%s; %s" % (address_error, e)
        return Column(expr, "value", None, 0, [], message)
    if gtype is not None:
        leaf = leaves_for_type(expr, gtype)[0]
        if not leaf.numeric or leaf.kind == "float":
            return Column(expr, "value", None, 0, [], "value of type %s has no address to read it from" % gtype)
    else:
        leaf = Leaf(expr, 0, 8, "int", "<q")
    return Column(expr, "value", program, 8, [leaf])


class TraceframeAt:
    """Selects a trace frame taken at ADDRESS (`tfind pc`) for the duration of a
    `with` block and restores the previous selection afterwards."""

    def __init__(self, address, enabled=True):
        self.address = address
        self.enabled = enabled
        self.selected = False

    def __enter__(self):
        if not self.enabled:
            return self
        try:
            self.previous = int(gdb.parse_and_eval("$trace_frame"))
        except (gdb.error, ValueError):
            self.previous = -1
        try:
            gdb.execute("tfind none", to_string=True)
            gdb.execute("tfind pc 0x%x" % self.address, to_string=True)
            self.selected = int(gdb.parse_and_eval("$trace_frame")) >= 0
        except (gdb.error, ValueError):
            self.selected = False
        return self

    def __exit__(self, *exc):
        if not self.enabled:
            return False
        try:
            if self.previous >= 0:
                gdb.execute("tfind %d" % self.previous, to_string=True)
            else:
                gdb.execute("tfind none", to_string=True)
        except gdb.error:
            pass
        return False


def trace_running():
    """Whether a trace run is in progress (gdb refuses tfind then)."""
    try:
        out = gdb.execute("tstatus", to_string=True)
    except gdb.error:
        return False
    return "Trace is running" in out


class Decoder:
    """Plans for every tracepoint, built on first use."""

    def __init__(self, tpdefs, ts_tsv=None, use_tfind=True, extra_exprs=None):
        self.tpdefs = tpdefs
        self.ts_tsv = ts_tsv
        self.use_tfind = use_tfind and not trace_running()
        self.extra_exprs = extra_exprs  # decode only these expressions (stats), or all collected
        self._plans = {}
        self.frozen = False

    def _exprs(self, tpdef, address, stepping):
        if self.extra_exprs is not None:
            return list(self.extra_exprs)
        out = []
        for e in (tpdef.step_collect if stepping else tpdef.collect):
            for x in expand_special(e, address):
                if x not in out:
                    out.append(x)
        return out

    def plan_for(self, frame):
        rip = regs_mod.read_int(frame.regs, regs_mod.RIP) if frame.regs is not None else None
        key = (frame.tp, rip)
        plan = self._plans.get(key)
        if plan is None:
            if self.frozen:
                plan = self._plans.get((frame.tp, self._first_address(frame.tp)))
                if plan is None or rip is not None:
                    plan = Plan(frame.tp, rip, [], [("*", "frame at 0x%x: no plan prepared for it (while-stepping "
                                                     "frames are not decoded live)" % (rip or 0))])
                self._plans[key] = plan
                return plan
            plan = self._plans[key] = self._build(frame.tp, rip)
        return plan

    def _first_address(self, tp_number):
        tpdef = self.tpdefs.get(tp_number)
        return tpdef.locations[0].address if tpdef and tpdef.locations else None

    def prepare_all(self):
        """Build the plan of every tracepoint location now and ask gdb nothing
        afterwards (the live view decodes from inside gdb's event loop, where
        running gdb commands would disturb a foreground `continue`)."""
        for tp, tpdef in self.tpdefs.items():
            for loc in tpdef.locations:
                key = (tp, loc.address)
                if key not in self._plans:
                    self._plans[key] = self._build(tp, loc.address)
        self.frozen = True

    def plans(self):
        return list(self._plans.values())

    def main_plan(self, tp_number):
        """Plan for frames taken at the tracepoint's first location."""
        tpdef = self.tpdefs.get(tp_number)
        address = tpdef.locations[0].address if tpdef and tpdef.locations else None
        key = (tp_number, address)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = self._build(tp_number, address)
        return plan

    def _build(self, tp_number, rip):
        tpdef = self.tpdefs.get(tp_number)
        if tpdef is None or not tpdef.locations:
            return Plan(tp_number, rip, [], [("*", "tracepoint %d is not defined in gdb" % tp_number)])
        addresses = [loc.address for loc in tpdef.locations]
        stepping = rip is not None and rip not in addresses and tpdef.step_count > 0
        address = rip if (rip in addresses or stepping) else addresses[0]
        location = tpdef.locations[addresses.index(address)] if address in addresses else tpdef.locations[0]
        exprs = self._exprs(tpdef, address, stepping)
        columns, problems = [], []
        with TraceframeAt(address, self.use_tfind) as sel:
            scope = Scope(address, None if stepping else linespec_of(location), sel.selected)
            for e in exprs:
                c = build_column(e, scope)
                columns.append(c)
                if c.error:
                    problems.append((e, c.error))
        if scope.approximate:
            problems.append(("*", "compiled at %s, not exactly at 0x%x (no trace frame could be selected): "
                             "locals may be misplaced" % (scope.linespec, address)))
        return Plan(tp_number, address, columns, problems, tpdef.label())


def timestamp_tsv(linespec=None):
    """Number of the `$trace_timestamp` trace state variable, or None when the
    stub defines none (then frame order stands in for time). Compiled in the
    current frame, else at LINESPEC."""
    for command in ("maint agent-eval $trace_timestamp",
                    "maint agent-eval -at %s, $trace_timestamp" % linespec if linespec else None):
        if command is None:
            continue
        try:
            ops = ax.parse_listing(gdb.execute(command, to_string=True).split("Scope:")[-1].partition("\n")[2])
        except (gdb.error, ax.AxError):
            continue
        for op in ops:
            if op.name == "getv":
                return op.arg
        return None
    return None
