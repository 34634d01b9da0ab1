/*
 * The one register numbering of gdbtrace: gdb's *remote* register numbers for
 * x86-64 Linux, i.e. the order of the target description gdbtrace-server sends
 * (features core, sse, linux, segments, avx — the same order gdbserver uses).
 *
 * Everything keys off this: the 'g'/'p' packets, the agent-expression `reg`
 * opcode (gdb translates its register numbers to these remote numbers before
 * emitting bytecode), and the 'R' block of a trace frame, which is exactly the
 * bytes of a 'g' reply (gdb's tfile reader finds a register at the offset its
 * remote number has in the 'g' layout).
 *
 * Freestanding C: included by the agent-expression VM, the kernel module and
 * the eBPF code generator, so no libc headers here. The plugin's copy
 * (gdb-plugin/gdbtrace_plugin/regs.py) is held equal by
 * tests/unit/abi/abi_python_test.cc.
 */
#ifndef GDBTRACE_AMD64_REGS_H
#define GDBTRACE_AMD64_REGS_H

enum gdbtrace_amd64_regnum {
  GT_RAX,
  GT_RBX,
  GT_RCX,
  GT_RDX,
  GT_RSI,
  GT_RDI,
  GT_RBP,
  GT_RSP,
  GT_R8,
  GT_R9,
  GT_R10,
  GT_R11,
  GT_R12,
  GT_R13,
  GT_R14,
  GT_R15,
  GT_RIP = 16,
  GT_EFLAGS = 17,
  GT_CS,
  GT_SS,
  GT_DS,
  GT_ES,
  GT_FS,
  GT_GS,       /* 18..23, 4 bytes each */
  GT_ST0 = 24, /* st0..st7: 10 bytes each */
  GT_FCTRL = 32,
  GT_FSTAT,
  GT_FTAG,
  GT_FISEG,
  GT_FIOFF,
  GT_FOSEG,
  GT_FOOFF,
  GT_FOP,       /* 4 bytes */
  GT_XMM0 = 40, /* xmm0..xmm15: 16 bytes each */
  GT_MXCSR = 56,
  GT_ORIG_RAX = 57, /* org.gnu.gdb.i386.linux */
  GT_FS_BASE = 58,
  GT_GS_BASE = 59, /* org.gnu.gdb.i386.segments */
  GT_YMM0H = 60,   /* ymm0h..ymm15h: 16 bytes each (AVX) */
  GT_NUM_REGS_NOAVX = 60,
  GT_NUM_REGS_AVX = 76
};

/* Size in bytes of register REGNO (0 for an unknown number). */
static inline unsigned gt_reg_size(unsigned regno) {
  if (regno < 17)
    return 8;
  if (regno < 24)
    return 4;
  if (regno < 32)
    return 10;
  if (regno < 40)
    return 4;
  if (regno < 56)
    return 16;
  if (regno == 56)
    return 4;
  if (regno < 60)
    return 8;
  if (regno < 76)
    return 16;
  return 0;
}

/* Offset of register REGNO in the 'g' layout / trace-frame 'R' block. */
static inline unsigned gt_reg_offset(unsigned regno) {
  unsigned off = 0, r;
  for (r = 0; r < regno && r < GT_NUM_REGS_AVX; r++)
    off += gt_reg_size(r);
  return off;
}

/* Bytes of the whole register block: 560 without AVX, 816 with AVX. */
#define GT_REGBLOCK_SIZE_NOAVX 560u
#define GT_REGBLOCK_SIZE_AVX 816u

#endif
