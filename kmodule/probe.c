// SPDX-License-Identifier: GPL-2.0
/*
 * Probe lifecycle: validate an add request, check the caller may ptrace the
 * target, copy and verify its programs, register the uprobe; unregister them
 * all when the session ends.
 *
 * uprobe API differences handled here:
 *   6.1:  int uprobe_register(inode, offset, uc); uprobe_unregister(inode, offset, uc);
 *         filter(uc, ctx, mm)
 *   6.12: struct uprobe *uprobe_register(inode, offset, ref_ctr_offset, uc);
 *         uprobe_unregister_nosync(uprobe, uc) + uprobe_unregister_sync(); filter(uc, mm)
 */
#include <linux/file.h>
#include <linux/pid.h>
#include <linux/ptrace.h>
#include <linux/sched/mm.h>
#include <linux/sched/task.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "gdbtrace.h"
#include "emulate.h"

#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 12, 0)
#define GT_UPROBE_NEW_API 1
#endif

static int gt_handler(struct uprobe_consumer *uc, struct pt_regs *regs)
{
	struct gt_probe *p = container_of(uc, struct gt_probe, uc);

	/* Another process mapping the same file (or the tracee after exec):
	 * ask the kernel to take the breakpoint out of that mm. */
	if (current->mm != p->mm)
		return UPROBE_HANDLER_REMOVE;
	gt_collect(p, regs);
	return 0;
}

#ifdef GT_UPROBE_NEW_API
static bool gt_filter(struct uprobe_consumer *uc, struct mm_struct *mm)
#else
static bool gt_filter(struct uprobe_consumer *uc, enum uprobe_filter_ctx ctx, struct mm_struct *mm)
#endif
{
	struct gt_probe *p = container_of(uc, struct gt_probe, uc);

	return mm == p->mm;
}

struct gt_probe *gt_probe_find(struct gt_session *s, u32 id)
{
	struct gt_probe *p;

	list_for_each_entry(p, &s->probes, node)
		if (p->id == id)
			return p;
	return NULL;
}

static void probe_free(struct gt_probe *p)
{
	u32 i;

	if (p->actions)
		for (i = 0; i < p->nr_actions; i++)
			kfree(p->actions[i].code);
	kfree(p->actions);
	kfree(p->cond);
	if (p->mm)
		mmdrop(p->mm);
	if (p->file)
		fput(p->file);
	kfree(p);
}

static u8 *copy_code(u64 uptr, u32 len)
{
	if (len == 0 || len > GDBTRACE_MAX_CODE)
		return ERR_PTR(-EINVAL);
	return memdup_user(u64_to_user_ptr(uptr), len);
}

static int copy_actions(struct gt_session *s, struct gt_probe *p, const struct gdbtrace_probe_add *req)
{
	struct gdbtrace_action *ua;
	u32 i;
	int ret = 0;

	if (req->nr_actions > GDBTRACE_MAX_ACTIONS)
		return -E2BIG;
	if (req->nr_actions == 0)
		return 0;
	ua = memdup_user(u64_to_user_ptr(req->actions), sizeof(*ua) * req->nr_actions);
	if (IS_ERR(ua))
		return PTR_ERR(ua);
	p->actions = kcalloc(req->nr_actions, sizeof(*p->actions), GFP_KERNEL);
	if (!p->actions) {
		kfree(ua);
		return -ENOMEM;
	}
	p->nr_actions = req->nr_actions;
	for (i = 0; i < req->nr_actions && !ret; i++) {
		struct gt_action *a = &p->actions[i];

		a->kind = ua[i].kind;
		if (ua[i].reserved) {
			ret = -EINVAL;
			break;
		}
		switch (ua[i].kind) {
		case GDBTRACE_ACT_REGS:
			break;
		case GDBTRACE_ACT_MEM:
			if (ua[i].basereg < -1 || ua[i].basereg >= 60 || ua[i].len == 0 ||
			    ua[i].len > GDBTRACE_MAX_MEM || ua[i].code)
				ret = -EINVAL;
			a->basereg = ua[i].basereg;
			a->offset = ua[i].offset;
			a->len = ua[i].len;
			break;
		case GDBTRACE_ACT_EXPR:
			a->code = copy_code(ua[i].code, ua[i].len);
			if (IS_ERR(a->code)) {
				ret = PTR_ERR(a->code);
				a->code = NULL;
				break;
			}
			a->len = ua[i].len;
			ret = gt_verify_code(s, a->code, a->len, 1, &a->info);
			break;
		default:
			ret = -EINVAL;
		}
	}
	kfree(ua);
	return ret;
}

/* Compare the emulation recipe with the instruction in the file (the uprobe
 * replaces it with int3 only in the process' private copy). */
static int check_emu(struct gt_probe *p, const struct gdbtrace_emu *emu)
{
	u8 bytes[GDBTRACE_MAX_EMU];
	loff_t pos = p->offset;
	ssize_t n;

	if (emu->op == GDBTRACE_EMU_NONE) {
		if (emu->insn_len || emu->dst || emu->src || emu->width || emu->imm)
			return -EINVAL;
		return 0;
	}
	n = kernel_read(p->file, bytes, sizeof(bytes), &pos);
	if (n < 0)
		return n;
	return gt_emu_check(emu, bytes, n);
}

static bool site_has_probe(struct gt_session *s, struct gt_probe *p)
{
	struct gt_probe *q;

	list_for_each_entry(q, &s->probes, node)
		if (q->mm == p->mm && q->offset == p->offset &&
		    file_inode(q->file) == file_inode(p->file))
			return true;
	return false;
}

static int register_probe(struct gt_probe *p)
{
	struct inode *inode = file_inode(p->file);

	p->uc.handler = gt_handler;
	p->uc.filter = gt_filter;
#ifdef GT_UPROBE_NEW_API
	p->uprobe = uprobe_register(inode, p->offset, 0, &p->uc);
	if (IS_ERR(p->uprobe)) {
		int ret = PTR_ERR(p->uprobe);

		p->uprobe = NULL;
		return ret;
	}
	return 0;
#else
	return uprobe_register(inode, p->offset, &p->uc);
#endif
}

static int resolve_target(struct gt_probe *p, pid_t pid)
{
	struct pid *ps;
	struct task_struct *task;
	struct mm_struct *mm;
	int ret = 0;

	ps = find_get_pid(pid);
	if (!ps)
		return -ESRCH;
	task = get_pid_task(ps, PIDTYPE_TGID);
	put_pid(ps);
	if (!task)
		return -ESRCH;
	if (!gt_ptrace_may_access(task, PTRACE_MODE_ATTACH_REALCREDS)) {
		ret = -EPERM;
		goto out;
	}
	mm = get_task_mm(task);
	if (!mm) {
		ret = -ESRCH;
		goto out;
	}
	mmgrab(mm);
	mmput(mm);
	p->mm = mm;
	p->tgid = task->tgid;
out:
	put_task_struct(task);
	return ret;
}

int gt_probe_add(struct gt_session *s, struct gdbtrace_probe_add *req)
{
	struct gt_probe *p;
	int ret;

	if (req->flags & ~GDBTRACE_PROBE_DISABLED || req->reserved || req->id)
		return -EINVAL;
	if (req->tp_number > 0xffff || req->pid <= 0)
		return -EINVAL;
	if (s->nr_probes >= GDBTRACE_MAX_PROBES)
		return -ENOSPC;

	p = kzalloc(sizeof(*p), GFP_KERNEL);
	if (!p)
		return -ENOMEM;
	p->s = s;
	p->offset = req->offset;
	p->address = req->address;
	p->tp = req->tp_number;
	p->pass_count = req->pass_count;
	p->enabled = !(req->flags & GDBTRACE_PROBE_DISABLED);

	ret = resolve_target(p, req->pid);
	if (ret)
		goto fail;
	p->file = fget(req->fd);
	if (!p->file) {
		ret = -EBADF;
		goto fail;
	}
	if (!S_ISREG(file_inode(p->file)->i_mode) || !(p->file->f_mode & FMODE_READ)) {
		ret = -EINVAL;
		goto fail;
	}
	if (req->offset >= i_size_read(file_inode(p->file))) {
		ret = -EINVAL;
		goto fail;
	}
	if (req->cond_len || req->cond) {
		p->cond = copy_code(req->cond, req->cond_len);
		if (IS_ERR(p->cond)) {
			ret = PTR_ERR(p->cond);
			p->cond = NULL;
			goto fail;
		}
		ret = gt_verify_code(s, p->cond, req->cond_len, 0, &p->cond_info);
		if (ret)
			goto fail;
	}
	ret = copy_actions(s, p, req);
	if (ret)
		goto fail;
	ret = check_emu(p, &req->emu);
	if (ret)
		goto fail;
	p->emu = req->emu;
	/* One emulation per hit: uprobe consumers run newest first, so only the
	 * oldest probe of this session at this site may move ip (after the
	 * others collected the unmodified registers). */
	if (site_has_probe(s, p))
		p->emu.op = GDBTRACE_EMU_NONE;

	p->id = s->next_id++;
	ret = register_probe(p);
	if (ret)
		goto fail;
	list_add_tail(&p->node, &s->probes);
	s->nr_probes++;
	req->id = p->id;
	return 0;
fail:
	probe_free(p);
	return ret;
}

void gt_probes_remove_all(struct gt_session *s)
{
	struct gt_probe *p, *tmp;

	list_for_each_entry(p, &s->probes, node) {
#ifdef GT_UPROBE_NEW_API
		uprobe_unregister_nosync(p->uprobe, &p->uc);
#else
		/* Synchronous: waits for running handlers (register_rwsem). */
		uprobe_unregister(file_inode(p->file), p->offset, &p->uc);
#endif
	}
#ifdef GT_UPROBE_NEW_API
	if (!list_empty(&s->probes))
		uprobe_unregister_sync(); /* no handler of ours runs after this */
#endif
	list_for_each_entry_safe(p, tmp, &s->probes, node) {
		list_del(&p->node);
		probe_free(p);
	}
	s->nr_probes = 0;
}
