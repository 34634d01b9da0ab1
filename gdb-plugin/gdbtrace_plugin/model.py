"""What a decoded frame looks like (no gdb import at module level).

A Plan says how to decode the frames of one tracepoint location: a list of
Columns (one per collected expression, each with a bytecode Program computing
its address or value) whose Leaves are the output columns (struct members
flattened). decode.py builds plans with gdb's help; batch.py and the
exporters use them without gdb.
"""

import struct

from . import ax


class Leaf:
    """One output column: a scalar piece (or a gdb-formatted blob) of an expression.

    kind: 'int', 'float', 'ptr' (shown in hex), 'enum' (shown by name), 'str'
    (char array), 'gdb' (formatted by gdb, not numeric)."""

    __slots__ = ("name", "offset", "size", "kind", "fmt", "_unpack", "gdbtype", "enum_names")

    def __init__(self, name, offset, size, kind, fmt=None, gdbtype=None, enum_names=None):
        self.name, self.offset, self.size, self.kind = name, offset, size, kind
        self.fmt = fmt  # struct code ('<i', '<d', ...) of scalar leaves
        self._unpack = struct.Struct(fmt).unpack_from if fmt else None
        self.gdbtype = gdbtype
        self.enum_names = enum_names

    @property
    def numeric(self):
        return self.kind in ("int", "float", "ptr", "enum")

    def from_bytes(self, data, base=0):
        if self._unpack is not None:
            return self._unpack(data, base + self.offset)[0]
        raw = bytes(data[base + self.offset : base + self.offset + self.size])
        if self.kind == "str":
            return raw.split(b"\0", 1)[0].decode("utf-8", "replace")
        if self.kind == "int":
            return int.from_bytes(raw, "little", signed=self._signed_wide())
        import gdb  # only 'gdb'-kind leaves need gdb itself

        value = gdb.Value(raw, self.gdbtype)
        if self.kind == "float":
            return float(value)
        return value.format_string(max_elements=64, repeat_threshold=0)

    def _signed_wide(self):
        try:
            return bool(self.gdbtype.is_signed)
        except (AttributeError, ValueError):
            return False

    def from_int(self, value):
        """Value computed by bytecode (unsigned 64-bit) to this leaf's kind."""
        if self.kind in ("int", "enum") and self.size and self._is_signed_int():
            bits = 8 * min(self.size, 8)
            value &= (1 << bits) - 1
            return value - (1 << bits) if value >> (bits - 1) else value
        return value

    def _is_signed_int(self):
        if self._unpack is not None:
            return self._unpack(b"\xff" * self.size)[0] < 0
        return self._signed_wide()

    def display(self, value):
        """Text for exports/console (numbers stay numbers in JSON via exporters)."""
        if value is None:
            return None
        if self.kind == "ptr":
            return "0x%x" % value
        if self.kind == "enum" and self.enum_names:
            return self.enum_names.get(value, value)
        return value


class Column:
    """One collected expression at one code address.

    mode 'mem': bytecode yields the address; the leaves decode the bytes there.
    mode 'value': bytecode yields the value itself (one integer leaf)."""

    __slots__ = ("expr", "mode", "program", "size", "leaves", "error")

    def __init__(self, expr, mode, program, size, leaves, error=None):
        self.expr, self.mode, self.program, self.size = expr, mode, program, size
        self.leaves, self.error = leaves, error

    def decode(self, frame, out):
        """Append one value per leaf (None: not available in this frame)."""
        try:
            v = self.program.run(frame)
        except ax.Unavailable:
            out.extend([None] * len(self.leaves))
            return
        if self.mode == "value":
            out.append(self.leaves[0].from_int(v))
            return
        data = frame.read(v, self.size)
        if data is None:
            out.extend([None] * len(self.leaves))
            return
        for leaf in self.leaves:
            out.append(leaf.from_bytes(data))


class Plan:
    """How to decode frames of one tracepoint taken at one code address."""

    def __init__(self, tp, address, columns, problems, label=None):
        self.tp = tp
        self.address = address
        self.columns = [c for c in columns if c.error is None]
        self.problems = problems  # [(expr, message)] for expressions that cannot be decoded
        self.leaves = [leaf for c in self.columns for leaf in c.leaves]
        self.names = [leaf.name for leaf in self.leaves]
        self.index = {name: i for i, name in enumerate(self.names)}
        self.label = label or "tp %d" % tp

    def decode(self, frame):
        out = []
        for column in self.columns:
            column.decode(frame, out)
        return out


