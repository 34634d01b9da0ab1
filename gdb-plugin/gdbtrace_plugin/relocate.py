"""Where a position-independent program was loaded when a trace file was taken.

gdb's `target tfile` reads a trace file's addresses (tracepoints, collected registers) as the
program's link-time addresses: it has no process whose mappings would relocate a PIE executable.
So under a plain `target tfile` a PIE program's tracepoints do not match gdb's symbols and every
local reads "No symbol ... in current context". The file itself says where the program was: each
tracepoint definition carries its runtime address and the location the user gave (`tp Z...:at:`).
Resolving that location against the program's symbols gives the link-time function, and the load
bias is the page-aligned distance between the two. No gdb import: `load_bias` takes a resolver.
"""

import struct

PAGE = 4096
ET_DYN = 3


def location_specs(tp_lines):
    """[(runtime address, location text)] from a trace file's `tp` lines: the `Z<n>:<addr>:at:`
    source strings (hex-encoded text). Addresses given as `*ADDR` say nothing about the bias and
    are left out."""
    out = []
    for line in tp_lines:
        if not line.startswith("Z"):
            continue
        parts = line[1:].split(":")
        if len(parts) < 6 or parts[2] != "at":
            continue
        try:
            address = int(parts[1], 16)
            text = bytes.fromhex(parts[5]).decode("utf-8", "replace")
        except ValueError:
            continue
        if text and not text.lstrip().startswith("*"):
            out.append((address, text))
    return out


def is_position_independent(path):
    """True for an ELF executable of type ET_DYN (PIE, or a shared object), False for ET_EXEC or
    a file that is not ELF."""
    try:
        with open(path, "rb") as f:
            head = f.read(18)
    except OSError:
        return False
    if len(head) < 18 or head[:4] != b"\x7fELF":
        return False
    order = "<" if head[5] == 1 else ">"
    return struct.unpack_from(order + "H", head, 16)[0] == ET_DYN


def _candidates(address, start, end):
    """Page-aligned biases that put ADDRESS inside the link-time range [START, END)."""
    lowest = address - (end - 1)
    first = (lowest + PAGE - 1) // PAGE * PAGE
    return set(range(max(first, 0), address - start + 1, PAGE))


def load_bias(specs, resolve):
    """The one page-aligned load bias consistent with every tracepoint, or (None, why).

    SPECS: [(runtime address, location text)]. RESOLVE(text) -> [(start, end)]: the link-time
    address ranges of the functions the location names (several for an ambiguous location).
    A tracepoint inside one of those functions after relocation is consistent with the bias."""
    common = None
    used = 0
    for address, text in specs:
        ranges = resolve(text)
        if not ranges:
            continue
        biases = set()
        for start, end in ranges:
            biases |= _candidates(address, start, end)
        common = biases if common is None else common & biases
        used += 1
    if not used:
        return None, "no tracepoint location in the file resolves in the program's symbols"
    if not common:
        return None, "the file's tracepoints fit no single load address of this program (another build?)"
    if len(common) > 1:
        return None, "%d load addresses fit the file's tracepoints: %s" % (
            len(common), ", ".join("0x%x" % b for b in sorted(common)[:4]))
    return common.pop(), None
