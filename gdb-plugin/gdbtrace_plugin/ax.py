"""Agent-expression evaluation over a recorded trace frame (no gdb import).

gdb compiles an expression at a code address into agent bytecode with
`maint agent-eval -at *ADDR, EXPR` -- the same compiler that produced the
tracepoint's collect actions, so it knows every DWARF location (frame-base
relative locals, CFA, globals, pointer chains). We run that bytecode in Python
against a frame: `reg` reads the frame's 'R' block, `ref*` reads its 'M' blocks,
`getv` its 'V' blocks. `&EXPR` therefore yields the address of EXPR in that
frame, and the bytes there decode to EXPR's value with gdb's type.

Most address programs are "register + constant" or "constant"; `compile`
reduces those to a closed form so that a million frames cost little.
"""

import re
import struct

from . import regs as regs_mod

MASK64 = (1 << 64) - 1

_LINE = re.compile(r"^\s*(\d+)\s+([a-z_0-9]+)(?:\s+(-?\d+))?")


class AxError(Exception):
    """The bytecode cannot be evaluated here (unsupported op, bad listing)."""


class Unavailable(Exception):
    """The frame does not hold a register/memory/variable the bytecode reads."""


class Op:
    __slots__ = ("pc", "name", "arg")

    def __init__(self, pc, name, arg):
        self.pc, self.name, self.arg = pc, name, arg

    def __repr__(self):
        return "%d %s%s" % (self.pc, self.name, "" if self.arg is None else " %d" % self.arg)


def parse_listing(text):
    """Ops from `maint agent`/`maint agent-eval` output (Scope/Reg mask lines skipped)."""
    ops = []
    for line in text.splitlines():
        if line.startswith("Scope:") or line.startswith("Reg mask:") or not line.strip():
            continue
        m = _LINE.match(line)
        if not m:
            raise AxError("cannot read agent expression line %r" % line)
        pc, name, arg = int(m.group(1)), m.group(2), m.group(3)
        ops.append(Op(pc, name, None if arg is None else int(arg)))
    if not ops or ops[-1].name != "end":
        raise AxError("agent expression does not end with 'end'")
    return ops


def _signed(v, bits=64):
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


_REF = {"ref8": 1, "ref16": 2, "ref32": 4, "ref64": 8}
_BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "lsh": lambda a, b: a << b if b < 64 else 0,
    "rsh_unsigned": lambda a, b: a >> b,
    "rsh_signed": lambda a, b: _signed(a) >> b,
    "bit_and": lambda a, b: a & b,
    "bit_or": lambda a, b: a | b,
    "bit_xor": lambda a, b: a ^ b,
    "equal": lambda a, b: int(a == b),
    "less_signed": lambda a, b: int(_signed(a) < _signed(b)),
    "less_unsigned": lambda a, b: int(a < b),
}


def _div(name, a, b):
    if b == 0:
        raise Unavailable("division by zero")
    if name == "div_unsigned":
        return a // b
    if name == "rem_unsigned":
        return a % b
    sa, sb = _signed(a), _signed(b)
    q = abs(sa) // abs(sb) * (1 if (sa < 0) == (sb < 0) else -1)
    return q if name == "div_signed" else sa - q * sb


def evaluate(ops, frame):
    """Run OPS against FRAME (frames.Frame); the unsigned 64-bit result."""
    by_pc = {op.pc: i for i, op in enumerate(ops)}
    stack = []
    i, steps = 0, 0
    while True:
        steps += 1
        if steps > 100000:
            raise AxError("agent expression does not terminate")
        op = ops[i]
        name, arg = op.name, op.arg
        i += 1
        try:
            if name.startswith("const"):
                stack.append(arg & MASK64)
            elif name == "reg":
                if frame.regs is None:
                    raise Unavailable("registers not collected")
                stack.append(regs_mod.read_int(frame.regs, arg))
            elif name in _BINARY:
                b, a = stack.pop(), stack.pop()
                stack.append(_BINARY[name](a, b) & MASK64)
            elif name in ("div_signed", "div_unsigned", "rem_signed", "rem_unsigned"):
                b, a = stack.pop(), stack.pop()
                stack.append(_div(name, a, b) & MASK64)
            elif name == "log_not":
                stack.append(int(stack.pop() == 0))
            elif name == "bit_not":
                stack.append(~stack.pop() & MASK64)
            elif name == "ext":
                stack.append(_signed(stack.pop(), arg) & MASK64)
            elif name == "zero_ext":
                stack.append(stack.pop() & ((1 << arg) - 1))
            elif name in _REF:
                address = stack.pop()
                data = frame.read(address, _REF[name])
                if data is None:
                    raise Unavailable("memory at 0x%x not collected" % address)
                stack.append(int.from_bytes(data, "little"))
            elif name == "getv":
                if not frame.tsv or arg not in frame.tsv:
                    raise Unavailable("trace state variable %d not collected" % arg)
                stack.append(frame.tsv[arg] & MASK64)
            elif name in ("trace", "tracenz"):
                stack.pop()
                stack.pop()
            elif name in ("trace_quick", "trace16", "tracev", "setv"):
                pass  # recording ops: no effect on the value
            elif name == "dup":
                stack.append(stack[-1])
            elif name == "pop":
                stack.pop()
            elif name == "swap":
                stack[-1], stack[-2] = stack[-2], stack[-1]
            elif name == "pick":
                stack.append(stack[-1 - arg])
            elif name == "rot":
                stack[-3], stack[-2], stack[-1] = stack[-1], stack[-3], stack[-2]
            elif name == "if_goto":
                if stack.pop() != 0:
                    i = by_pc[arg]
            elif name == "goto":
                i = by_pc[arg]
            elif name == "end":
                if not stack:
                    raise AxError("agent expression leaves an empty stack")
                return stack[-1]
            else:
                raise AxError("agent op %r is not supported by the plugin" % name)
        except (IndexError, KeyError) as e:
            raise AxError("malformed agent expression at %r: %s" % (op, e))


class Program:
    """An agent expression prepared for many frames.

    kind 'const' (value = const), 'reg' (value = register REGNO + const),
    or 'general' (interpreted)."""

    __slots__ = ("ops", "kind", "regno", "const", "_reg_offset")

    def __init__(self, ops):
        self.ops = ops
        self.kind, self.regno, self.const = _closed_form(ops)
        self._reg_offset = regs_mod.OFFSETS[self.regno] if self.kind == "reg" else 0

    def uses_registers(self):
        return any(op.name == "reg" for op in self.ops)

    def run(self, frame):
        if self.kind == "const":
            return self.const
        if self.kind == "reg":
            r = frame.regs
            if r is None:
                raise Unavailable("registers not collected")
            return (_U64.unpack_from(r, self._reg_offset)[0] + self.const) & MASK64
        return evaluate(self.ops, frame)


_U64 = struct.Struct("<Q")


def _closed_form(ops):
    """('const', None, c) or ('reg', n, c) when OPS is linear in one 8-byte
    register, else ('general', None, 0)."""
    stack = []  # entries: (regno or None, constant)
    general = ("general", None, 0)
    for op in ops:
        name, arg = op.name, op.arg
        if name.startswith("const"):
            stack.append((None, arg & MASK64))
        elif name == "reg":
            if regs_mod.reg_size(arg) != 8:
                return general
            stack.append((arg, 0))
        elif name in ("add", "sub"):
            if len(stack) < 2:
                return general
            (rb, cb), (ra, ca) = stack.pop(), stack.pop()
            if rb is not None and (name == "sub" or ra is not None):
                return general
            c = ca + cb if name == "add" else ca - cb
            stack.append((ra if ra is not None else rb, c & MASK64))
        elif name in ("ext", "zero_ext"):
            if not stack:
                return general
            r, c = stack.pop()
            if arg == 64:
                stack.append((r, c))
            elif r is None:
                v = _signed(c, arg) & MASK64 if name == "ext" else c & ((1 << arg) - 1)
                stack.append((None, v))
            else:
                return general
        elif name == "trace_quick":
            continue
        elif name == "end":
            if len(stack) != 1:
                return general
            r, c = stack[0]
            return ("const", None, c) if r is None else ("reg", r, c)
        else:
            return general
    return general
