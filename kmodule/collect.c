// SPDX-License-Identifier: GPL-2.0
/*
 * What a hit does: evaluate the condition, build one frame in the tfile layout
 * (u16 tp, u32 size, 'R'/'M'/'V' blocks) in this CPU's scratch area, then copy
 * it whole into this CPU's ring or count a drop. Runs in the uprobe handler
 * (task context of the tracee) with preemption disabled so each ring has a
 * single writer; user memory is read with copy_from_user_nofault(). The
 * scratch area is per CPU and shared by all sessions (main.c).
 */
#include <linux/irq_work.h>
#include <linux/preempt.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <asm/debugreg.h>
#include <asm/msr.h>
#include <asm/ptrace.h>
#include <asm/segment.h>

#include "abi/amd64_regs.h"
#include "abi/tframe.h"
#include "gdbtrace.h"
#include "x86/emulate.h"

struct gt_frame {
	u8 *buf;
	u32 len, cap;
};

struct gt_hit {
	struct gt_probe *p;
	struct pt_regs *regs;
	struct gt_frame f;
	struct ax_env env; /* the VM's services for this hit (hit_init) */
	struct gt_tsv_tx tx; /* the running program's TSV reads and writes */
	u32 steps_left;      /* of GT_HIT_STEP_BUDGET, for all programs of the hit */
};

struct gt_verify_tsvs {
	struct gt_session *s;
	u32 nr, num[GT_TSV_TX_MAX];
	bool too_many;
};

static int verify_tsv_exists(void *opaque, uint32_t num)
{
	struct gt_verify_tsvs *v = opaque;

	return num < GDBTRACE_MAX_TSVS && test_bit(num, v->s->tsv_defined);
}

/* A program's TSV accesses are one per-hit transaction of at most
 * GT_TSV_TX_MAX variables (tsv.c): count the distinct ones. */
static void verify_note_tsv(void *opaque, uint32_t num, uint32_t access)
{
	struct gt_verify_tsvs *v = opaque;
	u32 i;

	for (i = 0; i < v->nr; i++)
		if (v->num[i] == num)
			return;
	if (v->nr == GT_TSV_TX_MAX)
		v->too_many = true;
	else
		v->num[v->nr++] = num;
}

int gt_verify_code(struct gt_session *s, const u8 *code, u32 len, int allow_trace,
		   struct ax_verified *out)
{
	struct gt_verify_tsvs tsvs = { .s = s };
	struct ax_verify_ctx vctx = {
		.num_regs = GT_NUM_REGS_AVX,
		.tsv_exists = verify_tsv_exists,
		.note_tsv = verify_note_tsv,
		.opaque = &tsvs,
		.allow_trace_ops = allow_trace,
	};
	uint32_t err_pc = 0;
	int ret;

	/* ~13 KB of verifier work area: too big for a kernel stack. */
	vctx.scratch = kmalloc(sizeof(*vctx.scratch), GFP_KERNEL);
	if (!vctx.scratch)
		return -ENOMEM;
	ret = ax_verify(code, len, &vctx, out, &err_pc);
	kfree(vctx.scratch);
	if (ret) {
		pr_info_ratelimited("gdbtrace: bytecode rejected at %u: %s\n", err_pc, ax_strerror(ret));
		return -EINVAL;
	}
	/* Agent printf has no console to go to from the kernel. */
	if (out->uses_printf)
		return -EOPNOTSUPP;
	if (tsvs.too_many) {
		pr_info_ratelimited("gdbtrace: bytecode names more than %d trace state variables\n",
				    GT_TSV_TX_MAX);
		return -E2BIG;
	}
	return 0;
}

/* Register REGNO of the hit, as the 'g' layout holds it. */
static int reg_value(struct pt_regs *regs, u32 regno, u64 *v)
{
	unsigned short sel;

	switch (regno) {
	case GT_RAX: *v = regs->ax; return 0;
	case GT_RBX: *v = regs->bx; return 0;
	case GT_RCX: *v = regs->cx; return 0;
	case GT_RDX: *v = regs->dx; return 0;
	case GT_RSI: *v = regs->si; return 0;
	case GT_RDI: *v = regs->di; return 0;
	case GT_RBP: *v = regs->bp; return 0;
	case GT_RSP: *v = regs->sp; return 0;
	case GT_R8: *v = regs->r8; return 0;
	case GT_R9: *v = regs->r9; return 0;
	case GT_R10: *v = regs->r10; return 0;
	case GT_R11: *v = regs->r11; return 0;
	case GT_R12: *v = regs->r12; return 0;
	case GT_R13: *v = regs->r13; return 0;
	case GT_R14: *v = regs->r14; return 0;
	case GT_R15: *v = regs->r15; return 0;
	case GT_RIP: *v = regs->ip; return 0;
	case GT_EFLAGS: *v = regs->flags; return 0;
	case GT_CS: *v = regs->cs; return 0;
	case GT_SS: *v = regs->ss; return 0;
	/* Entry from user mode leaves the data/extra/fs/gs selectors untouched. */
	case GT_DS: savesegment(ds, sel); *v = sel; return 0;
	case GT_ES: savesegment(es, sel); *v = sel; return 0;
	case GT_FS: savesegment(fs, sel); *v = sel; return 0;
	case GT_GS: savesegment(gs, sel); *v = sel; return 0;
	case GT_ORIG_RAX: *v = regs->orig_ax; return 0;
	/* The kernel never uses FS; user GS base sits in KERNEL_GS_BASE after swapgs. */
	case GT_FS_BASE: *v = gt_rdmsr(MSR_FS_BASE); return 0;
	case GT_GS_BASE: *v = gt_rdmsr(MSR_KERNEL_GS_BASE); return 0;
	}
	return AX_ERR_REG_UNAVAILABLE;
}

static u8 *frame_reserve(struct gt_frame *f, u32 n)
{
	u8 *p;

	if (n > f->cap - f->len)
		return NULL;
	p = f->buf + f->len;
	f->len += n;
	return p;
}

static int put_regs_block(struct gt_hit *h, u32 flags)
{
	u32 size = h->p->s->regblock_size;
	u8 *b = frame_reserve(&h->f, GT_TFRAME_REGS_HEADER + size);
	u32 r, off;

	if (!b)
		return AX_ERR_TRACE;
	b[0] = GT_TFRAME_REGS;
	memset(b + GT_TFRAME_REGS_HEADER, 0, size);
	/* Registers 0..23 are contiguous at the start of the block (8-byte GPRs,
	 * rip, then 4-byte eflags and selectors); 57..59 follow the FPU/SSE area.
	 * Offsets accumulate here: gt_reg_offset() is a loop per call. */
	for (r = 0, off = GT_TFRAME_REGS_HEADER; r <= GT_GS; off += gt_reg_size(r), r++) {
		u64 v;

		if (reg_value(h->regs, r, &v) == 0)
			memcpy(b + off, &v, gt_reg_size(r));
	}
	for (off = GT_TFRAME_REGS_HEADER + gt_reg_offset(GT_ORIG_RAX), r = GT_ORIG_RAX; r <= GT_GS_BASE;
	     off += 8, r++) {
		u64 v;

		if (reg_value(h->regs, r, &v) == 0)
			memcpy(b + off, &v, 8);
	}
	if (flags & GDBTRACE_ACT_REGS_FPU)
		gt_put_fpu_regs(b + GT_TFRAME_REGS_HEADER, size);
	return 0;
}

/* 'M' block of LEN (<= GT_TFRAME_MEM_MAX) bytes at ADDR. With NZ, stop after the first
 * zero byte; *GOT tells how many bytes went in. */
static int put_mem_chunk(struct gt_hit *h, u64 addr, u32 len, int nz, u32 *got)
{
	u32 saved = h->f.len;
	u8 *b = frame_reserve(&h->f, GT_TFRAME_MEM_HEADER);
	u8 *data;
	u16 len16;

	if (!b || len > GT_TFRAME_MEM_MAX)
		goto full;
	data = frame_reserve(&h->f, len);
	if (!data)
		goto full;
	if (copy_from_user_nofault(data, (const void __user *)(uintptr_t)addr, len)) {
		u32 done = 0;

		if (nz) {
			/* tracenz may run up to unmapped memory: read byte by byte. */
			while (done < len &&
			       !copy_from_user_nofault(data + done,
						       (const void __user *)(uintptr_t)(addr + done), 1))
				done++;
		} else {
			/* What is readable of the range, up to the first fault, as
			 * gdbserver and the ptrace collector collect: a page at a
			 * time. A stack snapshot's piece that crosses the end of the
			 * stack mapping keeps the outermost frames this way. */
			while (done < len) {
				u64 at = addr + done;
				u32 n = min_t(u32, len - done, PAGE_SIZE - (at & (PAGE_SIZE - 1)));

				if (copy_from_user_nofault(data + done,
							   (const void __user *)(uintptr_t)at, n))
					break;
				done += n;
			}
		}
		if (done == 0)
			goto fault;
		len = done;
	}
	if (nz) {
		u8 *z = memchr(data, 0, len);

		if (z)
			len = z - data + 1;
	}
	h->f.len = saved + GT_TFRAME_MEM_HEADER + len;
	b[0] = GT_TFRAME_MEM;
	memcpy(b + GT_TFRAME_MEM_ADDR_OFFSET, &addr, sizeof(addr));
	len16 = len;
	memcpy(b + GT_TFRAME_MEM_LEN_OFFSET, &len16, sizeof(len16));
	*got = len;
	return 0;
full:
	h->f.len = saved;
	return AX_ERR_TRACE;
fault:
	h->f.len = saved;
	return AX_ERR_MEM;
}

/* Blocks hold at most GT_TFRAME_MEM_MAX bytes: longer ranges (trace with a big length)
 * become several blocks. */
static int put_mem_block(struct gt_hit *h, u64 addr, u32 len, int nz)
{
	while (len) {
		u32 n = len > GT_TFRAME_MEM_MAX ? GT_TFRAME_MEM_MAX : len, got = 0;
		int ret = put_mem_chunk(h, addr, n, nz, &got);

		if (ret)
			return ret;
		if (nz && (got < n || h->f.buf[h->f.len - 1] == 0))
			return 0; /* reached the terminating zero */
		addr += n;
		len -= n;
	}
	return 0;
}

/* The value is looked up before anything is reserved: a refused variable
 * leaves no block (and no stale scratch bytes) in the frame. */
static int put_tsv_block(struct gt_hit *h, u32 num)
{
	s64 v;
	int ret = gt_tsv_get(h->p->s, &h->tx, num, &v);
	u8 *b;

	if (ret)
		return ret;
	b = frame_reserve(&h->f, GT_TFRAME_TSV_SIZE);
	if (!b)
		return AX_ERR_TRACE;
	b[0] = GT_TFRAME_TSV;
	memcpy(b + GT_TFRAME_TSV_NUM_OFFSET, &num, sizeof(num));
	memcpy(b + GT_TFRAME_TSV_VALUE_OFFSET, &v, sizeof(v));
	return 0;
}

/* --- agent-expression services --- */

static int env_read_reg(void *opaque, uint32_t regno, uint64_t *value)
{
	struct gt_hit *h = opaque;

	return reg_value(h->regs, regno, value);
}

static int env_read_mem(void *opaque, uint64_t addr, void *buf, uint32_t len)
{
	return copy_from_user_nofault(buf, (const void __user *)(uintptr_t)addr, len) ? AX_ERR_MEM : 0;
}

static int env_get_tsv(void *opaque, uint32_t num, int64_t *value)
{
	struct gt_hit *h = opaque;

	return gt_tsv_get(h->p->s, &h->tx, num, value);
}

static int env_set_tsv(void *opaque, uint32_t num, int64_t value)
{
	struct gt_hit *h = opaque;

	return gt_tsv_set(h->p->s, &h->tx, num, value);
}

static int env_trace_mem(void *opaque, uint64_t addr, uint32_t len, int nz)
{
	return put_mem_block(opaque, addr, len, nz);
}

static int env_trace_tsv(void *opaque, uint32_t num)
{
	return put_tsv_block(opaque, num);
}

static int env_printf(void *opaque, const char *fmt, uint32_t fmt_len, uint32_t nargs,
		      const uint64_t *args)
{
	return AX_ERR_NOT_ALLOWED; /* refused at verification; never reached */
}

static void hit_init(struct gt_hit *h, struct gt_probe *p, struct pt_regs *regs)
{
	h->p = p;
	h->regs = regs;
	h->steps_left = GT_HIT_STEP_BUDGET;
	h->env = (struct ax_env){
		.opaque = h,
		.read_reg = env_read_reg,
		.read_mem = env_read_mem,
		.get_tsv = env_get_tsv,
		.set_tsv = env_set_tsv,
		.trace_mem = env_trace_mem,
		.trace_tsv = env_trace_tsv,
		.printf = env_printf,
	};
}

/* Evaluate one program from what is left of the hit's step budget. Its TSV
 * writes are published at the end (tsv.c); when another CPU updated a
 * variable it read meanwhile, it runs again, its blocks of the lost attempt
 * taken back, so `$x = $x + 1` on two CPUs at once counts twice. */
static int eval_program(struct gt_hit *h, const u8 *code, const struct ax_verified *info,
			u64 *result)
{
	u32 frame_len = h->f.len, used;
	bool first = true;
	int ret;

	h->env.steps_used = &used;
	for (;;) {
		if (!h->steps_left)
			return AX_ERR_STEP_BUDGET;
		gt_tsv_begin(&h->tx, first);
		first = false;
		used = 0;
		h->env.step_budget = h->steps_left;
		ret = ax_eval(code, info, &h->env, result);
		h->steps_left -= min(used, h->steps_left);
		if (ret || !info->uses_tsv || gt_tsv_commit(h->p->s, &h->tx))
			return ret;
		h->f.len = frame_len;
	}
}

static int run_actions(struct gt_hit *h)
{
	struct gt_probe *p = h->p;
	int errors = 0;
	u32 i;

	for (i = 0; i < p->nr_actions; i++) {
		struct gt_action *a = &p->actions[i];
		u64 base = 0, result;
		int ret = 0;

		switch (a->kind) {
		case GDBTRACE_ACT_REGS:
			ret = put_regs_block(h, a->flags);
			break;
		case GDBTRACE_ACT_MEM:
			if (a->basereg >= 0)
				ret = reg_value(h->regs, a->basereg, &base);
			if (!ret)
				ret = put_mem_block(h, base + a->offset, a->len, 0);
			break;
		case GDBTRACE_ACT_EXPR:
			ret = eval_program(h, a->code, &a->info, &result);
			break;
		}
		if (ret == AX_ERR_TRACE)
			return -ENOSPC; /* frame larger than GDBTRACE_MAX_FRAME */
		if (ret)
			errors++; /* e.g. unreadable memory: that block is left out */
	}
	if (errors)
		atomic64_add(errors, &p->errors);
	return 0;
}

static bool condition_true(struct gt_hit *h)
{
	u64 result = 0;

	if (!h->p->cond)
		return true;
	if (eval_program(h, h->p->cond, &h->p->cond_info, &result)) {
		atomic64_inc(&h->p->errors);
		return false;
	}
	return result != 0;
}

/* Copy the frame into this CPU's ring as one record, or count a drop. The
 * positions in the header are shared with the stub, so every offset is
 * reduced modulo the data size before use: a bogus tail can lose frames but
 * never make us write outside the ring. */
static void ring_put(struct gt_session *s, u32 cpu, struct gt_probe *p, const u8 *frame, u32 len)
{
	struct gdbtrace_ring_header *h = gt_ring_header(s, cpu);
	u8 *data = (u8 *)h + PAGE_SIZE;
	u64 size = s->data_size;
	u64 head = READ_ONCE(h->head);
	u64 tail = smp_load_acquire(&h->tail);
	u64 rec = ALIGN(sizeof(struct gdbtrace_record) + len, 16);
	u64 off = head & (size - 1) & ~15ull; /* records are 16-aligned: a pad record always fits */
	u64 contig = size - off;
	u64 used = head - tail;
	u64 need = rec + (contig < rec ? contig : 0);
	struct gdbtrace_record r = { .len = len, .flags = 0 };

	head = (head & ~(size - 1)) + off;
	if (used > size || need > size - used) {
		WRITE_ONCE(h->drops, READ_ONCE(h->drops) + 1);
		atomic64_inc(&p->drops);
		return;
	}
	if (contig < rec) {
		struct gdbtrace_record pad = { .len = 0, .flags = GDBTRACE_REC_PAD, .seq = 0 };

		memcpy(data + off, &pad, sizeof(pad));
		head += contig;
		off = 0;
	}
	memcpy(data + off + sizeof(r), frame, len);
	r.seq = atomic64_inc_return(&s->seq);
	memcpy(data + off, &r, sizeof(r));
	smp_store_release(&h->head, head + rec);
	atomic64_inc(&p->frames);
	atomic64_add(len, &p->bytes);
	/* Wake the stub when the ring passes half full; it also drains on a timer. */
	if (used < size / 2 && used + need >= size / 2)
		irq_work_queue(&s->wake_work);
}

static void stop_for_passcount(struct gt_session *s, struct gt_probe *p)
{
	if (atomic_xchg(&s->running, 0)) {
		WRITE_ONCE(s->stop_tp, p->tp);
		WRITE_ONCE(s->stop_reason, GDBTRACE_STOP_PASSCOUNT);
		irq_work_queue(&s->wake_work);
	}
}

/* Emulating must look exactly like executing. Not so, and the kernel's own
 * single-step runs the instruction instead, when
 * - the thread runs 32-bit code (the recipe was decoded as 64-bit code);
 * - TF is set (gdb `stepi`): emulation plus the next instruction would be one step;
 * - hardware breakpoints are armed on this CPU (the current task's, e.g. a gdb
 *   watchpoint): an emulated store would not trigger them. The task's debug
 *   registers are this CPU's while it runs: read them with preemption off
 *   (hw_breakpoint_active() is a per-CPU read). */
static bool may_emulate(struct pt_regs *regs)
{
	bool ok;

	if (!user_64bit_mode(regs) || (regs->flags & X86_EFLAGS_TF))
		return false;
	preempt_disable();
	ok = !hw_breakpoint_active();
	preempt_enable();
	return ok;
}

void gt_collect(struct gt_probe *p, struct pt_regs *regs)
{
	struct gt_session *s = p->s;
	struct gt_hit h;
	u64 hits;
	u32 cpu, size;

	/* Another consumer of this uprobe (another session, perf, BPF) already
	 * emulated the instruction: these registers are not the probe point's.
	 * No frame (it would be wrong) and certainly no second emulation. */
	if (regs->ip != p->address) {
		atomic64_inc(&p->errors);
		return;
	}
	if (!READ_ONCE(p->enabled) || !atomic_read(&s->running))
		goto emulate;
	preempt_disable();
	cpu = smp_processor_id();
	hit_init(&h, p, regs);
	h.f.buf = gt_scratch(cpu);
	h.f.cap = GDBTRACE_MAX_FRAME;
	h.f.len = GT_TFRAME_HEADER_SIZE; /* u16 tp, u32 size: filled in last */
	if (!condition_true(&h))
		goto out;
	hits = atomic64_inc_return(&p->hits);
	if (p->pass_count && hits > p->pass_count)
		goto out;
	if (run_actions(&h) == 0) {
		u16 tp = p->tp;

		size = h.f.len - GT_TFRAME_HEADER_SIZE;
		memcpy(h.f.buf, &tp, sizeof(tp));
		memcpy(h.f.buf + GT_TFRAME_SIZE_OFFSET, &size, sizeof(size));
		ring_put(s, cpu, p, h.f.buf, h.f.len);
	} else {
		atomic64_inc(&p->drops);
	}
	if (p->pass_count && hits == p->pass_count)
		stop_for_passcount(s, p);
out:
	preempt_enable();
emulate:
	/* Only the site's first probe of this session carries the recipe: it was
	 * registered first, so the kernel calls it after the others. */
	if (p->emu.op && may_emulate(regs) && gt_emu_apply(&p->emu, regs))
		atomic64_inc(&p->emulated);
}
