/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Relative and rip-indirect branches (call, jmp, jcc) at a tracepoint site,
 * decoded for the jump pad, which runs them from the pad instead of the site
 * (the kernel collectors leave branches to the kernel's own uprobe code).
 * Next to emulate.c, the one x86 decoder of the project: the same freestanding
 * C, the same user-space build (library gdbtrace_emulate).
 */
#ifndef GDBTRACE_BRANCH_H
#define GDBTRACE_BRANCH_H

#include "x86/emulate.h"

enum gt_branch_kind {
	GT_BRANCH_NONE = 0,
	GT_BRANCH_CALL_REL = 1, /* e8 rel32: call next_ip + disp */
	GT_BRANCH_JMP_REL = 2,  /* e9 rel32: jmp next_ip + disp */
	GT_BRANCH_JCC_REL = 3,  /* 0f 80+cc rel32: jcc next_ip + disp */
	GT_BRANCH_CALL_RIP = 4, /* ff 15 disp32: call *(next_ip + disp) */
	GT_BRANCH_JMP_RIP = 5,  /* ff 25 disp32: jmp *(next_ip + disp) */
};

struct gt_branch {
	u8 kind; /* enum gt_branch_kind */
	u8 len;  /* instruction bytes */
	u8 cc;   /* GT_BRANCH_JCC_REL: the condition (low nibble of the opcode) */
	s32 disp;
};

/* Decode BYTES[0..AVAIL) into OUT: 0, or -EOPNOTSUPP for any other
 * instruction (prefixed forms included: bnd, notrack, operand size). */
int gt_branch_decode(const u8 *bytes, u32 avail, struct gt_branch *out);

#endif
