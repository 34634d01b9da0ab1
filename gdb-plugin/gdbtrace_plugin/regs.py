"""x86-64 register layout of the 'R' block (mirrors gdbserver-agent/src/shared/abi/amd64_regs.h).

Remote register numbers = tdesc order = 'g' layout: 0-15 GPRs, 16 rip, 17 eflags,
18-23 segment selectors (4 bytes), 24-31 st0-7 (10 bytes), 32-39 x87 control (4),
40-55 xmm0-15 (16), 56 mxcsr (4), 57 orig_rax, 58 fs_base, 59 gs_base (8),
60-75 ymm0h-15h (16, AVX only).
"""

import struct

GPR_NAMES = [
    "rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp",
    "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15",
]
NAMES = (
    GPR_NAMES
    + ["rip", "eflags", "cs", "ss", "ds", "es", "fs", "gs"]
    + ["st%d" % i for i in range(8)]
    + ["fctrl", "fstat", "ftag", "fiseg", "fioff", "foseg", "fooff", "fop"]
    + ["xmm%d" % i for i in range(16)]
    + ["mxcsr", "orig_rax", "fs_base", "gs_base"]
    + ["ymm%dh" % i for i in range(16)]
)
RIP, EFLAGS, RSP, RBP, FS_BASE = 16, 17, 7, 6, 58
REGBLOCK_SIZE_NOAVX = 560
REGBLOCK_SIZE_AVX = 816

# Registers `$regs` exports as columns: the integer state a reader looks at.
EXPORTED = GPR_NAMES + ["rip", "eflags"]


def _standard_size(regno):
    if regno < 17:
        return 8
    if regno < 24:
        return 4
    if regno < 32:
        return 10
    if regno < 40:
        return 4
    if regno < 56:
        return 16
    if regno == 56:
        return 4
    if regno < 60:
        return 8
    if regno < 76:
        return 16
    raise ValueError("no register number %d on x86-64" % regno)


SIZES = [_standard_size(r) for r in range(len(NAMES))]


def reg_size(regno):
    if not 0 <= regno < len(SIZES):
        raise ValueError("no register number %d in this trace's register block" % regno)
    return SIZES[regno]


OFFSETS = []
_off = 0
for _r in range(len(NAMES)):
    OFFSETS.append(_off)
    _off += reg_size(_r)
assert OFFSETS[60] == REGBLOCK_SIZE_NOAVX and _off == REGBLOCK_SIZE_AVX

NUMBER = {name: i for i, name in enumerate(NAMES)}
NUMBER.update({"pc": RIP, "sp": RSP, "fp": RBP})
_STANDARD = (list(NAMES), list(SIZES))


def use_layout(registers=None):
    """The 'R' block layout the frames of the trace at hand use: REGISTERS, [(name, bytes)] in
    remote-number order, as a streamed file's target description numbers them (the registers every
    frame holds first: docs/streaming.md); None for the standard layout above. The numbers gdb
    compiles into agent expressions for that trace are these remote numbers. A register the block
    lacks has no number (its reads fail; they are never read as 0)."""
    global RIP, EFLAGS, RSP, RBP, FS_BASE, EXPORTED
    names, sizes = _STANDARD if registers is None else ([n for n, _ in registers], [b for _, b in registers])
    NAMES[:] = names
    SIZES[:] = sizes
    OFFSETS[:] = [sum(sizes[:r]) for r in range(len(sizes))]
    NUMBER.clear()
    NUMBER.update({name: i for i, name in enumerate(names)})
    first = lambda *candidates: next((NUMBER[n] for n in candidates if n in NUMBER), None)  # noqa: E731
    RIP, RSP, RBP = first("rip", "eip"), first("rsp", "esp"), first("rbp", "ebp")
    EFLAGS, FS_BASE = first("eflags"), first("fs_base")
    for alias, number in (("pc", RIP), ("sp", RSP), ("fp", RBP)):
        if number is not None:
            NUMBER[alias] = number
    # `$regs` columns: the integer registers up to eflags (x86-64: rax..r15, rip; i386: eax..eip).
    EXPORTED = names[: NUMBER["eflags"] + 1] if "eflags" in NUMBER else []


def tdesc_registers(xml, block_size):
    """[(name, bytes)] of the registers an 'R' block of BLOCK_SIZE bytes (None: all of them) holds
    under the target description XML (by regnum, as gdb's tfile reader walks them), or None when it
    cannot tell."""
    import re

    regs = []
    for m in re.finditer(r"<reg\s([^>]*)/?>", xml):
        attrs = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        try:
            regs.append((int(attrs["regnum"]), attrs["name"], int(attrs["bitsize"]) // 8))
        except (KeyError, ValueError):
            return None
    regs.sort()
    out, used = [], 0
    for _num, name, size in regs:
        if block_size is not None and used + size > block_size:
            break
        out.append((name, size))
        used += size
    return out if block_size is None or used == block_size else None

_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")


def read_int(regs, regno):
    """Unsigned integer value of an integer register from an 'R' block (None: not in the block)."""
    if regno is None:
        return None
    size = reg_size(regno)
    off = OFFSETS[regno]
    if size == 8:
        return _U64.unpack_from(regs, off)[0]
    if size == 4:
        return _U32.unpack_from(regs, off)[0]
    return int.from_bytes(regs[off : off + size], "little")
