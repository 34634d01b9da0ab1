/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Emulation of common tracepoint-site instructions in the uprobe handler, so
 * kernels that skip the out-of-line single-step when a handler moved regs->ip
 * (upstream 4363264111e1) save ~10 µs per hit.
 *
 * The module decodes the probed instruction at ADD with the small decoder here
 * (exactly the supported forms; anything else is single-stepped by the kernel)
 * and reports the recipe. One source for both sides: gdbtrace.ko compiles it
 * (kmodule/Makefile copies gdbserver-agent/src/shared into the module's
 * directory) and so does the stub (library gdbtrace_emulate: the ptrace
 * collector's step-over, the eBPF collector's recipes) and the user-space unit
 * tests (tests/unit/kmod), which compare it with the CPU executing the same
 * instructions and its decoder with Zydis.
 */
#ifndef GDBTRACE_EMULATE_H
#define GDBTRACE_EMULATE_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <asm/ptrace.h>
#else
/* struct pt_regs with kernel field names, u8/u32/u64, memory access */
#include "x86/emulate_user.h"
#endif
#include "gdbtrace_uapi.h" /* kmodule/uapi: struct gdbtrace_emu, the recipe */

/* Decode BYTES[0..AVAIL) into OUT. 0, or -EOPNOTSUPP for anything else. */
int gt_emu_decode(const u8 *bytes, u32 avail, struct gdbtrace_emu *out);
/* Execute EMU on REGS (ip at the instruction). False, with REGS untouched,
 * when a memory operand faults: the kernel then single-steps as usual. */
bool gt_emu_apply(const struct gdbtrace_emu *emu, struct pt_regs *regs);
/* Bytes after the ModRM byte MODRM (SIB, displacement) that its operand takes,
 * any form, in REST[0..AVAIL); -1 when they run past AVAIL. The one ModRM
 * length rule: gt_emu_decode uses it, and so does the ptrace collector's
 * step-over for the instructions it runs beside the recipes (multi-byte nop). */
int gt_emu_modrm_operand_len(const u8 *rest, u32 avail, u8 modrm);

#endif
