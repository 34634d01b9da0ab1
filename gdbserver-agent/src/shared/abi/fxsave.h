/*
 * The legacy FXSAVE region (64-bit format, the first 512 bytes of an XSAVE
 * area) and how its x87/SSE registers go into the 'g' layout of
 * amd64_regs.h. One owner for both readers of user FPU state: the stub
 * (PTRACE_GETFPREGS, target/x86_registers.cc) and the kernel module (the
 * task's saved fpstate, kmodule/fpu.c).
 *
 * Freestanding C: no libc headers.
 */
#ifndef GDBTRACE_FXSAVE_H
#define GDBTRACE_FXSAVE_H

#include "amd64_regs.h"

/* Byte offsets in the FXSAVE image. gdb splits the instruction and operand
 * pointers into a 32-bit offset and a 16-bit selector, as gdbserver does. */
enum gt_fxsave_offset {
  GT_FX_FCW = 0,    /* u16 */
  GT_FX_FSW = 2,    /* u16 */
  GT_FX_FTW = 4,    /* u8, abridged: bit i = physical register i not empty */
  GT_FX_FOP = 6,    /* u16, low 11 bits */
  GT_FX_FIP = 8,    /* u32 */
  GT_FX_FCS = 12,   /* u16 */
  GT_FX_FDP = 16,   /* u32 */
  GT_FX_FDS = 20,   /* u16 */
  GT_FX_MXCSR = 24, /* u32 */
  GT_FX_ST = 32,    /* st0..st7, 16 bytes apart, 10 used */
  GT_FX_XMM = 160,  /* xmm0..xmm15, 16 bytes each */
  GT_FX_SIZE = 512
};

/* XSAVE header and the AVX component. YMM_Hi128 is the first extended
 * component, so it sits at 576 in the standard and the compacted format. */
#define GT_XSAVE_XSTATE_BV 512u
#define GT_XSAVE_YMM_HI 576u
#define GT_XFEATURE_FP 1u
#define GT_XFEATURE_SSE 2u
#define GT_XFEATURE_YMM 4u
/* Values of a component in its initial state (XSTATE_BV bit clear). */
#define GT_X87_INIT_FCW 0x037fu
#define GT_MXCSR_INIT 0x1f80u

/* gdb's 2-bit tag of one x87 register's 10 raw bytes (i387_ftag): 0 valid,
 * 1 zero, 2 special. An empty register (3) is known only from the abridged
 * tag. */
static inline unsigned gt_x87_tag(const unsigned char* raw) {
  unsigned integer = raw[7] & 0x80;
  unsigned exponent = ((raw[9] & 0x7fu) << 8) | raw[8];
  unsigned fraction =
      raw[0] | raw[1] | raw[2] | raw[3] | raw[4] | raw[5] | raw[6] | (raw[7] & 0x7fu);
  if (exponent == 0x7fff)
    return 2;
  if (exponent == 0)
    return (fraction == 0 && !integer) ? 1 : 2;
  return integer ? 0 : 2;
}

/* The full tag word gdb shows as ftag, from the abridged FXSAVE tag: physical
 * register i is st((i - TOP) mod 8), whose bytes are at ST + 16 * that. */
static inline unsigned gt_x87_full_tag(unsigned fsw, unsigned abridged, const unsigned char* st) {
  unsigned top = (fsw >> 11) & 7, ftag = 0;
  int i;
  for (i = 7; i >= 0; i--) {
    unsigned tag = (abridged & (1u << i)) ? gt_x87_tag(st + 16 * ((i + 8 - top) % 8)) : 3;
    ftag |= tag << (2 * i);
  }
  return ftag;
}

static inline unsigned gt_fx_u16(const unsigned char* fx, unsigned off) {
  return fx[off] | ((unsigned)fx[off + 1] << 8);
}

static inline unsigned gt_fx_u32(const unsigned char* fx, unsigned off) {
  return gt_fx_u16(fx, off) | (gt_fx_u16(fx, off + 2) << 16);
}

/* Little-endian VALUE into 4 bytes at P. */
static inline void gt_put_le32(unsigned char* p, unsigned value) {
  p[0] = (unsigned char)value;
  p[1] = (unsigned char)(value >> 8);
  p[2] = (unsigned char)(value >> 16);
  p[3] = (unsigned char)(value >> 24);
}

/* Registers st0..mxcsr (24..56) of BLOCK (a 'g' layout) from the FXSAVE image
 * FX. Components absent from XFEATURES (an XSAVE area's XSTATE_BV: bit 0 x87,
 * bit 1 SSE) are in their initial state, whatever stale bytes FX holds there;
 * pass GT_XFEATURE_FP | GT_XFEATURE_SSE for a plain FXSAVE image. The
 * kernel's rule for MXCSR: saved when SSE or AVX state is. */
static inline void gt_fxsave_to_block(const unsigned char* fx, unsigned xfeatures,
                                      unsigned char* block) {
  /* st0..st7 (10 bytes), fctrl..fop (4 bytes), xmm0..xmm15, mxcsr follow each other. */
  unsigned char *st = block + gt_reg_offset(GT_ST0), *ctl = st + 80, *xmm = ctl + 32,
                *mxcsr = xmm + 256;
  int fp = (xfeatures & GT_XFEATURE_FP) != 0, sse = (xfeatures & GT_XFEATURE_SSE) != 0;
  unsigned i, r;
  for (i = 0; i < 8; i++)
    for (r = 0; r < 10; r++)
      st[10 * i + r] = fp ? fx[GT_FX_ST + 16 * i + r] : 0;
  if (fp) {
    unsigned fsw = gt_fx_u16(fx, GT_FX_FSW);
    gt_put_le32(ctl + 4 * (GT_FCTRL - GT_FCTRL), gt_fx_u16(fx, GT_FX_FCW));
    gt_put_le32(ctl + 4 * (GT_FSTAT - GT_FCTRL), fsw);
    gt_put_le32(ctl + 4 * (GT_FTAG - GT_FCTRL), gt_x87_full_tag(fsw, fx[GT_FX_FTW], fx + GT_FX_ST));
    gt_put_le32(ctl + 4 * (GT_FISEG - GT_FCTRL), gt_fx_u16(fx, GT_FX_FCS));
    gt_put_le32(ctl + 4 * (GT_FIOFF - GT_FCTRL), gt_fx_u32(fx, GT_FX_FIP));
    gt_put_le32(ctl + 4 * (GT_FOSEG - GT_FCTRL), gt_fx_u16(fx, GT_FX_FDS));
    gt_put_le32(ctl + 4 * (GT_FOOFF - GT_FCTRL), gt_fx_u32(fx, GT_FX_FDP));
    gt_put_le32(ctl + 4 * (GT_FOP - GT_FCTRL), gt_fx_u16(fx, GT_FX_FOP) & 0x7ff);
  } else {
    for (r = GT_FCTRL; r <= GT_FOP; r++)
      gt_put_le32(ctl + 4 * (r - GT_FCTRL), 0);
    gt_put_le32(ctl + 4 * (GT_FCTRL - GT_FCTRL), GT_X87_INIT_FCW);
    gt_put_le32(ctl + 4 * (GT_FTAG - GT_FCTRL), 0xffff); /* all empty */
  }
  for (i = 0; i < 16 * 16; i++)
    xmm[i] = sse ? fx[GT_FX_XMM + i] : 0;
  gt_put_le32(mxcsr, (xfeatures & (GT_XFEATURE_SSE | GT_XFEATURE_YMM)) ? gt_fx_u32(fx, GT_FX_MXCSR)
                                                                       : GT_MXCSR_INIT);
}

#endif
