// SPDX-License-Identifier: GPL-2.0
#ifdef __KERNEL__
#include <linux/errno.h>
#include <linux/string.h>
#endif
#include "x86/branch.h"

static s32 rel32(const u8 *p)
{
	s32 v;

	memcpy(&v, p, 4);
	return v;
}

static int found(struct gt_branch *out, u8 kind, u8 len, u8 cc, const u8 *disp)
{
	out->kind = kind;
	out->len = len;
	out->cc = cc;
	out->disp = rel32(disp);
	return 0;
}

int gt_branch_decode(const u8 *b, u32 avail, struct gt_branch *out)
{
	memset(out, 0, sizeof(*out));
	if (avail >= 5 && b[0] == 0xe8)
		return found(out, GT_BRANCH_CALL_REL, 5, 0, b + 1);
	if (avail >= 5 && b[0] == 0xe9)
		return found(out, GT_BRANCH_JMP_REL, 5, 0, b + 1);
	if (avail >= 6 && b[0] == 0x0f && (b[1] & 0xf0) == 0x80)
		return found(out, GT_BRANCH_JCC_REL, 6, b[1] & 0x0f, b + 2);
	/* ModRM 0x15 / 0x25: mod 0, rm 5 ([rip+disp32]), reg 2 (call) / 4 (jmp). */
	if (avail >= 6 && b[0] == 0xff && b[1] == 0x15)
		return found(out, GT_BRANCH_CALL_RIP, 6, 0, b + 2);
	if (avail >= 6 && b[0] == 0xff && b[1] == 0x25)
		return found(out, GT_BRANCH_JMP_RIP, 6, 0, b + 2);
	return -EOPNOTSUPP;
}
