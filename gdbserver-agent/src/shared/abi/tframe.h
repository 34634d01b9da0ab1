/*
 * One trace frame in gdb's tfile / gdbserver traceframe layout: the one
 * description of it. Little endian, packed:
 *
 *   header  u16 tracepoint number, u32 size of the blocks that follow
 *   'R'     + register block (the 'g' layout of abi/amd64_regs.h:
 *             GT_REGBLOCK_SIZE_NOAVX or GT_REGBLOCK_SIZE_AVX bytes)
 *   'M'     + u64 address + u16 length + length bytes
 *   'V'     + u32 trace state variable number + i64 value
 *
 * Inside the stub (eBPF ring records, the trace buffer) a frame may carry
 * compact register blocks instead of 'R' (trace/compact_frame.h):
 *
 *   'r'     + one slot per register of a layout the reader knows: a u64 for
 *             registers of 8 bytes or less, the register's bytes for wider ones
 *
 * They never leave the stub: everything gdb, a file or the plugin reads is
 * expanded to 'R' first.
 *
 * Writers: trace/frame.h FrameBuilder (ptrace collector), the eBPF program
 * (bpf/bpf_codegen.cc), the kernel module (kmodule/collect.c). Readers:
 * trace/frame.h FrameView (engine, tfind, kernel collectors' drains), gdb
 * itself (QTSave tfiles), the plugin (gdb-plugin/gdbtrace_plugin/frames.py,
 * kept equal by tests/unit/abi/abi_python_test.cc).
 *
 * Freestanding C (no libc): included by the kernel module like ax/ax.h.
 */
#ifndef GDBTRACE_ABI_TFRAME_H
#define GDBTRACE_ABI_TFRAME_H

#ifdef __KERNEL__
#include <linux/types.h>
#else
#include <stdint.h>
#endif

#define GT_TFRAME_HEADER_SIZE 6u /* u16 tracepoint + u32 size */
#define GT_TFRAME_SIZE_OFFSET 2u /* where the u32 size sits in the header */

#define GT_TFRAME_REGS 'R'
#define GT_TFRAME_MEM 'M'
#define GT_TFRAME_TSV 'V'
#define GT_TFRAME_COMPACT_REGS 'r' /* the stub's own; see above */

/* Bytes of each block before its payload (the tag included). */
#define GT_TFRAME_REGS_HEADER 1u  /* 'R', then the register block */
#define GT_TFRAME_MEM_HEADER 11u  /* 'M', u64 address, u16 length, then the bytes */
#define GT_TFRAME_TSV_SIZE 13u    /* 'V', u32 number, i64 value: no payload */
#define GT_TFRAME_MEM_MAX 0xffffu /* bytes one 'M' block holds; longer ranges are split */

/* Field offsets inside a block, counted from its tag. */
#define GT_TFRAME_MEM_ADDR_OFFSET 1u
#define GT_TFRAME_MEM_LEN_OFFSET 9u
#define GT_TFRAME_TSV_NUM_OFFSET 1u
#define GT_TFRAME_TSV_VALUE_OFFSET 5u

/* Header fields of the frame starting at P (GT_TFRAME_HEADER_SIZE bytes readable). */
static inline uint16_t gt_tframe_tp(const uint8_t* p) {
  return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t gt_tframe_size(const uint8_t* p) {
  const uint8_t* s = p + GT_TFRAME_SIZE_OFFSET;
  return (uint32_t)s[0] | ((uint32_t)s[1] << 8) | ((uint32_t)s[2] << 16) | ((uint32_t)s[3] << 24);
}

#endif
