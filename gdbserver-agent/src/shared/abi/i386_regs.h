/*
 * gdb's remote register numbers for an i386 (gcc -m32) Linux process: the
 * order of the i386-linux target description (features core, sse, linux, avx:
 * gdb/arch/i386.c as gdbserver builds it; no segments feature), the layout of
 * the 'g' packet and of an i386 trace frame's 'R' block.
 *
 * Every i386 register is the low part of an amd64 register of the same thread
 * (ptrace on a 64-bit kernel hands out the 64-bit register file for 32-bit
 * processes too), so gdbtrace keeps one register file (RegisterBlock, numbered
 * as abi/amd64_regs.h) and maps each i386 number to its amd64 one here.
 *
 * Freestanding C, like amd64_regs.h.
 */
#ifndef GDBTRACE_I386_REGS_H
#define GDBTRACE_I386_REGS_H

#include "amd64_regs.h"

enum gdbtrace_i386_regnum {
  GT32_EAX,
  GT32_ECX,
  GT32_EDX,
  GT32_EBX,
  GT32_ESP,
  GT32_EBP,
  GT32_ESI,
  GT32_EDI,
  GT32_EIP = 8,
  GT32_EFLAGS = 9,
  GT32_CS,         /* cs ss ds es fs gs: 10..15 */
  GT32_ST0 = 16,   /* st0..st7: 10 bytes each */
  GT32_FCTRL = 24, /* fctrl .. fop: 4 bytes each */
  GT32_XMM0 = 32,  /* xmm0..xmm7 */
  GT32_MXCSR = 40,
  GT32_ORIG_EAX = 41, /* org.gnu.gdb.i386.linux */
  GT32_YMM0H = 42,    /* ymm0h..ymm7h (AVX) */
  GT32_NUM_REGS_NOAVX = 42,
  GT32_NUM_REGS_AVX = 50
};

/* Size in bytes of i386 register REGNO (0 for an unknown number). */
static inline unsigned gt32_reg_size(unsigned regno) {
  if (regno < GT32_ST0)
    return 4;
  if (regno < GT32_FCTRL)
    return 10;
  if (regno < GT32_XMM0)
    return 4;
  if (regno < GT32_MXCSR)
    return 16;
  if (regno < GT32_YMM0H)
    return 4;
  if (regno < GT32_NUM_REGS_AVX)
    return 16;
  return 0;
}

/* Offset of i386 register REGNO in the 'g' layout / trace-frame 'R' block. */
static inline unsigned gt32_reg_offset(unsigned regno) {
  unsigned off = 0, r;
  for (r = 0; r < regno && r < GT32_NUM_REGS_AVX; r++)
    off += gt32_reg_size(r);
  return off;
}

/* The amd64 register (abi/amd64_regs.h) whose low bytes hold i386 register REGNO. */
static inline unsigned gt32_to_amd64(unsigned regno) {
  static const unsigned char gprs[16] = {GT_RAX, GT_RCX, GT_RDX, GT_RBX,    GT_RSP, GT_RBP,
                                         GT_RSI, GT_RDI, GT_RIP, GT_EFLAGS, GT_CS,  GT_SS,
                                         GT_DS,  GT_ES,  GT_FS,  GT_GS};
  if (regno < GT32_ST0)
    return gprs[regno];
  if (regno < GT32_MXCSR)
    return GT_ST0 + (regno - GT32_ST0); /* st, x87 control, xmm0-7: same order */
  if (regno == GT32_MXCSR)
    return GT_MXCSR;
  if (regno == GT32_ORIG_EAX)
    return GT_ORIG_RAX;
  return GT_YMM0H + (regno - GT32_YMM0H);
}

/* Bytes of the whole i386 register block: 312 without AVX, 440 with AVX. */
#define GT32_REGBLOCK_SIZE_NOAVX 312u
#define GT32_REGBLOCK_SIZE_AVX 440u

#endif
