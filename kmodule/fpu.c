// SPDX-License-Identifier: GPL-2.0
/*
 * x87/SSE/AVX registers of the hitting task for an 'R' block.
 *
 * A uprobe handler runs in the task's own context, on its way back to user
 * mode, so the user's FPU registers are either still live in the CPU or
 * already saved in the task's fpstate (TIF_NEED_FPU_LOAD). kernel_fpu_begin
 * settles which: it saves live user registers into the fpstate (and marks
 * them to be restored on return to user mode), after which the fpstate holds
 * the user's values in every case. That save plus the restore it causes is
 * the extra cost of a hit that collects these registers, paid only by
 * tracepoints that ask for them (GDBTRACE_ACT_REGS_FPU).
 */
#include <linux/kernel.h>
#include <linux/sched.h>
#include <linux/string.h>
#include <asm/cpufeature.h>
#include <asm/fpu/api.h>
#include <asm/fpu/types.h>

#include "abi/amd64_regs.h"
#include "abi/fxsave.h"
#include "compat.h"
#include "gdbtrace.h"

void gt_put_fpu_regs(u8 *block, u32 regblock_size)
{
	const u8 *area;
	u64 xfeatures;
	unsigned int i;

	if (!boot_cpu_has(X86_FEATURE_FXSR))
		return;
	kernel_fpu_begin_mask(0);
	area = (const u8 *)&gt_task_fpstate(current)->regs;
	if (boot_cpu_has(X86_FEATURE_XSAVE))
		/* Components not in XSTATE_BV are in their initial state: their
		 * bytes in the area are stale, so they are not read. */
		memcpy(&xfeatures, area + GT_XSAVE_XSTATE_BV, sizeof(xfeatures));
	else
		xfeatures = GT_XFEATURE_FP | GT_XFEATURE_SSE; /* FXSAVE writes both */
	gt_fxsave_to_block(area, (unsigned int)xfeatures, block);
	if (regblock_size >= GT_REGBLOCK_SIZE_AVX) {
		u8 *ymmh = block + gt_reg_offset(GT_YMM0H);

		if ((xfeatures & GT_XFEATURE_YMM) && boot_cpu_has(X86_FEATURE_AVX))
			memcpy(ymmh, area + GT_XSAVE_YMM_HI, 16 * 16);
		else
			for (i = 0; i < 16 * 16; i++)
				ymmh[i] = 0;
	}
	kernel_fpu_end();
}
