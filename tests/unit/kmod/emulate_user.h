/* User-space build of kmodule/emulate.c for the unit tests: struct pt_regs with
 * the kernel's field names and plain memory access in place of the
 * *_nofault user-copy helpers. */
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
  unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax, ip, cs, flags,
      sp, ss;
};

static inline bool emu_read(void *dst, u64 addr, u32 len) {
  memcpy(dst, (const void *)(uintptr_t)addr, len);
  return true;
}

static inline bool emu_write(u64 addr, const void *src, u32 len) {
  memcpy((void *)(uintptr_t)addr, src, len);
  return true;
}

#endif
