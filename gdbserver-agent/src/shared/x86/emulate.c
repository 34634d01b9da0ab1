// SPDX-License-Identifier: GPL-2.0
/* Instruction emulation for probed sites: see emulate.h. */
#ifdef __KERNEL__
#include <linux/errno.h>
#include <linux/string.h>
#include <linux/uaccess.h>

/* One access of the operand's width, as the instruction makes it: another
 * thread never sees half of an emulated store (copy_*_user_nofault may copy
 * byte by byte). Page faults are off: a fault declines the emulation and the
 * kernel single-steps the instruction, which takes the fault properly. */
static bool emu_read(void *dst, u64 addr, u32 len)
{
	void __user *p = (void __user *)(uintptr_t)addr;
	int ret = -EFAULT;

	if (!access_ok(p, len))
		return false;
	pagefault_disable();
	if (len == 8) {
		u64 v;

		ret = __get_user(v, (u64 __user *)p);
		if (!ret)
			*(u64 *)dst = v;
	} else if (len == 4) {
		u32 v;

		ret = __get_user(v, (u32 __user *)p);
		if (!ret)
			*(u32 *)dst = v;
	}
	pagefault_enable();
	return ret == 0;
}

static bool emu_write(u64 addr, const void *src, u32 len)
{
	void __user *p = (void __user *)(uintptr_t)addr;
	int ret = -EFAULT;

	if (!access_ok(p, len))
		return false;
	pagefault_disable();
	if (len == 8)
		ret = __put_user(*(const u64 *)src, (u64 __user *)p);
	else if (len == 4)
		ret = __put_user(*(const u32 *)src, (u32 __user *)p);
	pagefault_enable();
	return ret == 0;
}
#endif

#include "x86/emulate.h"

/* x86 register encoding (rax rcx rdx rbx rsp rbp rsi rdi r8..) -> gdb numbering. */
static const u8 hw_to_gdb[16] = { 0, 2, 3, 1, 7, 6, 4, 5, 8, 9, 10, 11, 12, 13, 14, 15 };

static unsigned long *gpr(struct pt_regs *r, unsigned int n)
{
	switch (n) {
	case 0: return &r->ax;
	case 1: return &r->bx;
	case 2: return &r->cx;
	case 3: return &r->dx;
	case 4: return &r->si;
	case 5: return &r->di;
	case 6: return &r->bp;
	case 7: return &r->sp;
	case 8: return &r->r8;
	case 9: return &r->r9;
	case 10: return &r->r10;
	case 11: return &r->r11;
	case 12: return &r->r12;
	case 13: return &r->r13;
	case 14: return &r->r14;
	default: return &r->r15;
	}
}

static s64 sext8(u8 v) { return (s8)v; }

static s64 sext32(const u8 *p)
{
	s32 v;

	memcpy(&v, p, 4);
	return v;
}

int gt_emu_modrm_operand_len(const u8 *rest, u32 avail, u8 modrm)
{
	u8 mod = modrm >> 6, rm = modrm & 7;
	bool sib_base5 = false;
	u32 n = 0;

	if (mod == 3)
		return 0;
	if (rm == 4) {
		if (avail < 1)
			return -1;
		sib_base5 = (rest[0] & 7) == 5; /* with mod 0: disp32, no base */
		n = 1;
	}
	if (mod == 1)
		n += 1;
	else if (mod == 2 || (mod == 0 && (rm == 5 || sib_base5)))
		n += 4;
	return n <= avail ? (int)n : -1;
}

/* ModRM memory operand forms we accept: [rip+disp32], [base], [base+disp8],
 * [base+disp32], with rsp/r12 as base through the SIB byte 0x24. Sets *RIP for
 * the rip-relative form. Returns bytes consumed after ModRM, or -1. */
static int decode_mem(const u8 *p, u32 avail, u8 modrm, u8 rex, int *base, s64 *disp, bool *rip)
{
	u8 mod = modrm >> 6, rm = modrm & 7;
	int n = gt_emu_modrm_operand_len(p, avail, modrm);
	u32 sib = rm == 4 ? 1 : 0;

	*rip = false;
	if (n < 0 || mod == 3)
		return -1;
	if (mod == 0 && rm == 5) {
		*rip = true;
		*disp = sext32(p);
		return n;
	}
	/* Only SIB 0x24, "base rsp/r12, no index": and only without REX.X, which
	 * turns index 100 from "none" into r12. */
	if (sib && (p[0] != 0x24 || (rex & 2)))
		return -1;
	*base = hw_to_gdb[rm | ((rex & 1) << 3)];
	if (mod == 0)
		*disp = 0;
	else if (mod == 1)
		*disp = sext8(p[sib]);
	else
		*disp = sext32(p + sib);
	return n;
}

int gt_emu_decode(const u8 *b, u32 avail, struct gdbtrace_emu *out)
{
	u32 i = 0;
	u8 rex = 0, op, modrm, reg, rm, mod;
	bool w, rip;
	int base = 0, n;
	s64 disp = 0;

	memset(out, 0, sizeof(*out));
	if (avail >= 4 && b[0] == 0xf3 && b[1] == 0x0f && b[2] == 0x1e && b[3] == 0xfa) {
		out->op = GDBTRACE_EMU_ENDBR;
		out->insn_len = 4;
		goto done;
	}
	if (i < avail && (b[i] & 0xf0) == 0x40)
		rex = b[i++];
	if (i >= avail)
		return -EOPNOTSUPP;
	op = b[i++];
	w = rex & 8;
	out->width = w ? 8 : 4;

	if (op >= 0xb8 && op <= 0xbf) { /* mov $imm, r32 / movabs $imm64, r64 */
		out->op = GDBTRACE_EMU_MOV_IMM;
		out->dst = hw_to_gdb[(op & 7) | ((rex & 1) << 3)];
		if (w) {
			if (avail < i + 8)
				return -EOPNOTSUPP;
			memcpy(&out->imm, b + i, 8);
			i += 8;
		} else {
			if (avail < i + 4)
				return -EOPNOTSUPP;
			out->imm = (u32)sext32(b + i);
			i += 4;
		}
		out->insn_len = i;
		goto done;
	}
	if (op != 0x89 && op != 0x8b && op != 0x8d && op != 0x83 && op != 0x81 && op != 0xc7)
		return -EOPNOTSUPP;
	if (i >= avail)
		return -EOPNOTSUPP;
	modrm = b[i++];
	mod = modrm >> 6;
	reg = ((modrm >> 3) & 7) | ((rex & 4) << 1);
	rm = (modrm & 7) | ((rex & 1) << 3);

	if (op == 0x83 || op == 0x81 || op == 0xc7) { /* immediate forms, register operand only */
		u8 sub = (modrm >> 3) & 7;

		if (mod != 3 || (rex & 4))
			return -EOPNOTSUPP;
		out->dst = hw_to_gdb[rm];
		if (op == 0x83) {
			if (avail < i + 1)
				return -EOPNOTSUPP;
			out->imm = sext8(b[i]);
			i += 1;
		} else {
			if (avail < i + 4)
				return -EOPNOTSUPP;
			out->imm = sext32(b + i);
			i += 4;
		}
		if (op == 0xc7 && sub == 0) {
			out->op = GDBTRACE_EMU_MOV_IMM;
			if (!w)
				out->imm = (u32)out->imm;
		} else if (op != 0xc7 && sub == 0) {
			out->op = GDBTRACE_EMU_ADD_IMM;
		} else if (op != 0xc7 && sub == 5) {
			out->op = GDBTRACE_EMU_SUB_IMM;
		} else {
			return -EOPNOTSUPP;
		}
		out->insn_len = i;
		goto done;
	}
	if (mod == 3) {
		if (op == 0x8d)
			return -EOPNOTSUPP;
		out->op = GDBTRACE_EMU_MOV_REG_REG;
		out->dst = hw_to_gdb[op == 0x89 ? rm : reg];
		out->src = hw_to_gdb[op == 0x89 ? reg : rm];
		out->insn_len = i;
		goto done;
	}
	n = decode_mem(b + i, avail - i, modrm, rex, &base, &disp, &rip);
	if (n < 0)
		return -EOPNOTSUPP;
	i += n;
	out->imm = disp;
	out->insn_len = i;
	if (op == 0x8d) {
		if (!rip)
			return -EOPNOTSUPP;
		out->op = GDBTRACE_EMU_LEA_RIP;
		out->dst = hw_to_gdb[reg];
	} else if (op == 0x8b) {
		out->op = rip ? GDBTRACE_EMU_LOAD_RIP : GDBTRACE_EMU_LOAD;
		out->dst = hw_to_gdb[reg];
		out->src = rip ? 0 : base;
	} else {
		out->op = rip ? GDBTRACE_EMU_STORE_RIP : GDBTRACE_EMU_STORE;
		out->src = hw_to_gdb[reg];
		out->dst = rip ? 0 : base;
	}
done:
	if (out->insn_len > GDBTRACE_MAX_EMU)
		return -EOPNOTSUPP;
	memcpy(out->insn, b, out->insn_len);
	return 0;
}

static void set_arith_flags(struct pt_regs *regs, u64 a, u64 b, u64 r, bool sub, u32 width)
{
	u64 sign = width == 8 ? 1ull << 63 : 1ull << 31;
	unsigned long f = regs->flags & ~0x8d5ul;
	u8 p = r & 0xff;
	bool cf = sub ? a < b : r < a;
	bool of = sub ? ((a ^ b) & (a ^ r) & sign) != 0 : ((a ^ r) & (b ^ r) & sign) != 0;

	p ^= p >> 4;
	p ^= p >> 2;
	p ^= p >> 1;
	f |= cf ? 0x1 : 0;
	f |= (p & 1) ? 0 : 0x4;            /* PF: even number of set bits */
	f |= ((a ^ b ^ r) & 0x10) ? 0x10 : 0; /* AF */
	f |= r == 0 ? 0x40 : 0;
	f |= (r & sign) ? 0x80 : 0;
	f |= of ? 0x800 : 0;
	regs->flags = f;
}

bool gt_emu_apply(const struct gdbtrace_emu *e, struct pt_regs *regs)
{
	u64 mask = e->width == 8 ? ~0ull : 0xffffffffull;
	u64 next = regs->ip + e->insn_len;
	u64 v = 0, a, b, addr;

	switch (e->op) {
	case GDBTRACE_EMU_ENDBR:
		break;
	case GDBTRACE_EMU_MOV_REG_REG:
		*gpr(regs, e->dst) = *gpr(regs, e->src) & mask;
		break;
	case GDBTRACE_EMU_ADD_IMM:
	case GDBTRACE_EMU_SUB_IMM:
		a = *gpr(regs, e->dst) & mask;
		b = (u64)e->imm & mask;
		v = (e->op == GDBTRACE_EMU_ADD_IMM ? a + b : a - b) & mask;
		set_arith_flags(regs, a, b, v, e->op == GDBTRACE_EMU_SUB_IMM, e->width);
		*gpr(regs, e->dst) = v;
		break;
	case GDBTRACE_EMU_MOV_IMM:
		*gpr(regs, e->dst) = (u64)e->imm & mask;
		break;
	case GDBTRACE_EMU_LEA_RIP:
		*gpr(regs, e->dst) = (next + e->imm) & mask;
		break;
	case GDBTRACE_EMU_LOAD_RIP:
	case GDBTRACE_EMU_LOAD:
		addr = (e->op == GDBTRACE_EMU_LOAD_RIP ? next : *gpr(regs, e->src)) + e->imm;
		if (!emu_read(&v, addr, e->width))
			return false;
		*gpr(regs, e->dst) = v & mask;
		break;
	case GDBTRACE_EMU_STORE_RIP:
	case GDBTRACE_EMU_STORE:
		addr = (e->op == GDBTRACE_EMU_STORE_RIP ? next : *gpr(regs, e->dst)) + e->imm;
		v = *gpr(regs, e->src);
		if (!emu_write(addr, &v, e->width))
			return false;
		break;
	default:
		return false;
	}
	regs->ip = next;
	return true;
}
