/* User-space build of x86/emulate.c (library gdbtrace_emulate): struct
 * pt_regs with the kernel's field names, and memory access in place of the
 * kernel's *_nofault user-copy helpers. Shared by the unit tests (which
 * emulate against their own memory) and the stub (which emulates a tracee's
 * instruction and reaches the tracee's memory through gt_emu_memory). */
#ifndef GDBTRACE_EMULATE_USER_H
#define GDBTRACE_EMULATE_USER_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef int8_t s8;
typedef int32_t s32;
typedef int64_t s64;

struct pt_regs {
  unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax, ip, cs,
      flags, sp, ss;
};

/* Where gt_emu_apply's memory operands live. Null (the default): the calling
 * process's own memory. A tracer points it, for the calling thread, at
 * accessors of the tracee's memory; an accessor returns false when the
 * access faults, and gt_emu_apply then declines with REGS untouched. */
struct gt_emu_memory {
  bool (*read)(void* ctx, void* dst, u64 addr, u32 len);
  bool (*write)(void* ctx, u64 addr, const void* src, u32 len);
  void* ctx;
};
#ifdef __cplusplus
extern "C" thread_local const struct gt_emu_memory* gt_emu_memory;
#else
extern _Thread_local const struct gt_emu_memory* gt_emu_memory;
#endif

static inline bool emu_read(void* dst, u64 addr, u32 len) {
  if (gt_emu_memory)
    return gt_emu_memory->read(gt_emu_memory->ctx, dst, addr, len);
  memcpy(dst, (const void*)(uintptr_t)addr, len);
  return true;
}

static inline bool emu_write(u64 addr, const void* src, u32 len) {
  if (gt_emu_memory)
    return gt_emu_memory->write(gt_emu_memory->ctx, addr, src, len);
  memcpy((void*)(uintptr_t)addr, src, len);
  return true;
}

#endif
