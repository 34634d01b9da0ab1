// SPDX-License-Identifier: GPL-2.0
/*
 * Emulation recipes: not implemented yet. Every recipe is refused, so probes
 * always take the kernel's own path (emulation of nop/push, else single-step).
 */
#include "gdbtrace.h"

int gt_emu_check(const struct gdbtrace_emu *emu, const u8 *bytes, u32 avail)
{
	return -EOPNOTSUPP;
}

bool gt_emu_apply(const struct gdbtrace_emu *emu, struct pt_regs *regs)
{
	return false;
}
