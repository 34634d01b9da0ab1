// SPDX-License-Identifier: GPL-2.0
/*
 * Probe lifecycle: validate an add request, bind the target (the caller must
 * be its ptracer), copy and verify its programs, decode the probed instruction
 * for emulation, register the uprobe; unregister them all when the session
 * ends. Kernel API differences live in compat.h.
 */
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/file.h>
#include <linux/pid.h>
#include <linux/ptrace.h>
#include <linux/sched/mm.h>
#include <linux/sched/task.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include <asm/mmu_context.h>

#include "gdbtrace.h"
#include "x86/emulate.h"

static GT_UPROBE_HANDLER(gt_handler, uc, regs)
{
	struct gt_probe *p = container_of(uc, struct gt_probe, uc);

	/* Another process mapping the same file (or the tracee after exec):
	 * ask the kernel to take the breakpoint out of that mm. */
	if (current->mm != p->mm)
		return UPROBE_HANDLER_REMOVE;
	gt_collect(p, regs);
	return 0;
}

static GT_UPROBE_FILTER(gt_filter, uc, mm)
{
	struct gt_probe *p = container_of(uc, struct gt_probe, uc);

	return mm == p->mm;
}

struct gt_probe *gt_probe_find(struct gt_session *s, u32 id)
{
	return xa_load(&s->ids, id);
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

/* memdup_user() charged to the caller's memory cgroup: a session may hold
 * 65 536 probes of 64 programs each. */
static void *memdup_user_account(u64 uptr, size_t len)
{
	void *p = kmalloc(len, GT_GFP_ACCOUNT);

	if (!p)
		return ERR_PTR(-ENOMEM);
	if (copy_from_user(p, u64_to_user_ptr(uptr), len)) {
		kfree(p);
		return ERR_PTR(-EFAULT);
	}
	return p;
}

static u8 *copy_code(u64 uptr, u32 len)
{
	if (len == 0 || len > GDBTRACE_MAX_CODE)
		return ERR_PTR(-EINVAL);
	return memdup_user_account(uptr, len);
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
	ua = memdup_user_account(req->actions, sizeof(*ua) * req->nr_actions);
	if (IS_ERR(ua))
		return PTR_ERR(ua);
	p->actions = kcalloc(req->nr_actions, sizeof(*p->actions), GT_GFP_ACCOUNT);
	if (!p->actions) {
		kfree(ua);
		return -ENOMEM;
	}
	p->nr_actions = req->nr_actions;
	for (i = 0; i < req->nr_actions && !ret; i++) {
		struct gt_action *a = &p->actions[i];

		a->kind = ua[i].kind;
		a->flags = ua[i].flags;
		if (ua[i].flags & ~(ua[i].kind == GDBTRACE_ACT_REGS ? GDBTRACE_ACT_REGS_FPU : 0)) {
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

/* The recipe for the probed instruction, decoded from the file (the uprobe
 * replaces it with int3 only in the process' private copy). Leaves P->emu
 * zero (single-step) for anything the decoder does not know. */
static int decode_emu(struct gt_probe *p)
{
	u8 bytes[GDBTRACE_MAX_EMU];
	loff_t pos = p->offset;
	ssize_t n;

	n = kernel_read(p->file, bytes, sizeof(bytes), &pos);
	if (n < 0)
		return n;
	if (gt_emu_decode(bytes, n, &p->emu))
		memset(&p->emu, 0, sizeof(p->emu));
	return 0;
}

static unsigned long site_key(struct gt_probe *p)
{
	return (unsigned long)p->mm ^ (unsigned long)file_inode(p->file) ^ (unsigned long)p->offset;
}

static bool site_has_probe(struct gt_session *s, struct gt_probe *p)
{
	struct gt_probe *q;

	hash_for_each_possible(s->sites, q, site_node, site_key(p))
		if (q->mm == p->mm && q->offset == p->offset &&
		    file_inode(q->file) == file_inode(p->file))
			return true;
	return false;
}

static int register_probe(struct gt_probe *p)
{
	p->uc.handler = gt_handler;
	p->uc.filter = gt_filter;
	return gt_uprobe_register(file_inode(p->file), p->offset, &p->uc, &p->uprobe);
}

/* The trust rule: a caller may probe exactly the processes it already
 * debugs. Some thread of TASK's group must be ptraced by a thread of the
 * caller's group. (The stub always is the tracer; root gets no exception.) */
static bool caller_traces(struct task_struct *task)
{
	struct task_struct *t;
	bool ok = false;

	rcu_read_lock();
	for_each_thread(task, t) {
		struct task_struct *tracer = ptrace_parent(t);

		if (tracer && same_thread_group(tracer, current)) {
			ok = true;
			break;
		}
	}
	rcu_read_unlock();
	return ok;
}

/* The caller's (file, offset) must be what MM maps executable at the probe
 * address: the stub resolved it from /proc/PID/maps, and a file that merely
 * has the same inode number elsewhere, or a stale mapping, is refused here. */
static int check_site_mapped(struct gt_probe *p, struct mm_struct *mm)
{
	struct vm_area_struct *vma;
	int ret = -ESTALE;

	if (mmap_read_lock_killable(mm))
		return -EINTR;
	vma = vma_lookup(mm, p->address);
	if (vma && vma->vm_file && file_inode(vma->vm_file) == file_inode(p->file) &&
	    (vma->vm_flags & VM_EXEC) &&
	    p->address - vma->vm_start + ((u64)vma->vm_pgoff << PAGE_SHIFT) == p->offset)
		ret = 0;
	mmap_read_unlock(mm);
	return ret;
}

/* A live thread of TASK's group, referenced: the group leader may have
 * exited (a zombie without an mm) while other threads run on. */
static struct task_struct *live_thread(struct task_struct *task)
{
	struct task_struct *t, *found = NULL;

	rcu_read_lock();
	for_each_thread(task, t) {
		if (READ_ONCE(t->mm) && !(t->flags & PF_EXITING)) {
			found = get_task_struct(t);
			break;
		}
	}
	rcu_read_unlock();
	return found;
}

/* ptrace's own access rule for an attach with real credentials
 * (PTRACE_MODE_ATTACH_REALCREDS), applied now rather than only when the
 * caller attached: the caller's real ids must be the target's, or it has
 * CAP_SYS_PTRACE over the target's user namespace; and a non-dumpable
 * address space (setuid image, prctl(PR_SET_DUMPABLE, 0)) needs
 * CAP_SYS_PTRACE over the namespace owning it, as PTRACE_PEEKDATA does.
 * (ptrace_may_access() itself is not exported.) */
static bool caller_may_access(struct task_struct *t, struct mm_struct *mm)
{
	const struct cred *cred = current_cred(), *tcred;
	bool ok;

	rcu_read_lock();
	tcred = __task_cred(t);
	ok = (uid_eq(cred->uid, tcred->euid) && uid_eq(cred->uid, tcred->suid) &&
	      uid_eq(cred->uid, tcred->uid) && gid_eq(cred->gid, tcred->egid) &&
	      gid_eq(cred->gid, tcred->sgid) && gid_eq(cred->gid, tcred->gid)) ||
	     ns_capable(tcred->user_ns, CAP_SYS_PTRACE);
	rcu_read_unlock();
	if (ok) {
		struct user_namespace *ns;

		if (!gt_owner_dumpable(t, mm, &ns))
			ok = ns_capable(ns, CAP_SYS_PTRACE);
		put_user_ns(ns);
	}
	return ok;
}

/* Bind P to the address space of process PID. The ptracer and access checks,
 * taking the mm and checking the probe site is mapped there happen under the
 * target's exec_update_lock (as mm_access() and perf_event_open() do), so an
 * exec of a setuid binary cannot slip between them: the probe binds the image
 * the caller was allowed to debug, and the mm filter keeps it off every later
 * image. */
static int bind_target(struct gt_probe *p, pid_t pid)
{
	struct task_struct *task, *t = NULL;
	struct mm_struct *mm = NULL;
	struct pid *ps;
	int ret;

	/* PID is a number in the caller's pid namespace (find_get_pid() is
	 * find_vpid(): task_active_pid_ns(current), as kill() and ptrace()
	 * read it). A caller in a container names only the processes of its
	 * namespace; one outside has no number there and is ESRCH. */
	ps = find_get_pid(pid);
	if (!ps)
		return -ESRCH;
	task = get_pid_task(ps, PIDTYPE_TGID);
	put_pid(ps);
	if (!task)
		return -ESRCH;
	ret = down_read_killable(&task->signal->exec_update_lock);
	if (ret)
		goto out;
	if (!caller_traces(task))
		ret = -EPERM;
	else if (!(t = live_thread(task)) || !(mm = get_task_mm(t)))
		ret = -ESRCH;
	else if (!caller_may_access(t, mm))
		ret = -EPERM;
	else
		ret = check_site_mapped(p, mm);
	up_read(&task->signal->exec_update_lock);
	if (t)
		put_task_struct(t);
	if (ret) {
		if (mm)
			mmput(mm);
		goto out;
	}
	mmgrab(mm);
	p->mm = mm;
	p->tgid = task->tgid;
	/* 32-bit code decodes differently (8b 05 is absolute, 0x4X is inc/dec). */
	p->mm_64bit = is_64bit_mm(mm);
	mmput(mm);
out:
	put_task_struct(task);
	return ret;
}

int gt_probe_add(struct gt_session *s, struct gdbtrace_probe_add *req)
{
	struct gt_probe *p;
	int ret;

	if (req->flags & ~(GDBTRACE_PROBE_DISABLED | GDBTRACE_PROBE_EMULATE) || req->reserved || req->id)
		return -EINVAL;
	if (memchr_inv(&req->emu, 0, sizeof(req->emu)))
		return -EINVAL; /* out only: the module decodes the instruction itself */
	if (req->tp_number > 0xffff || req->pid <= 0)
		return -EINVAL;
	/* Never emulate on a kernel that would then run the instruction again
	 * (gt_emu_selftest()); INIT's features say which case this is. */
	if ((req->flags & GDBTRACE_PROBE_EMULATE) && gt_emu_state != GT_EMU_OK)
		return -EOPNOTSUPP;
	if (s->nr_probes >= GDBTRACE_MAX_PROBES)
		return -ENOSPC;
	ret = gt_add_throttle(s->owner);
	if (ret)
		return ret;

	p = kzalloc(sizeof(*p), GT_GFP_ACCOUNT);
	if (!p)
		return -ENOMEM;
	p->s = s;
	p->offset = req->offset;
	p->address = req->address;
	p->tp = req->tp_number;
	p->pass_count = req->pass_count;
	p->enabled = !(req->flags & GDBTRACE_PROBE_DISABLED);

	p->file = fget(req->fd);
	if (!p->file) {
		ret = -EBADF;
		goto fail;
	}
	if (!S_ISREG(file_inode(p->file)->i_mode) || !(p->file->f_mode & FMODE_READ)) {
		ret = -EINVAL;
		goto fail;
	}
	ret = bind_target(p, req->pid);
	if (ret)
		goto fail;
	if (req->offset >= i_size_read(file_inode(p->file))) {
		ret = -EINVAL; /* mapped, but past the end of the file */
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
	/* One emulation per hit: uprobe consumers run newest first, so only the
	 * oldest probe of this session at this site may move ip (after the
	 * others collected the unmodified registers). */
	if ((req->flags & GDBTRACE_PROBE_EMULATE) && p->mm_64bit &&
	    !site_has_probe(s, p)) {
		ret = decode_emu(p);
		if (ret)
			goto fail;
	}

	p->id = s->next_id;
	ret = xa_insert(&s->ids, p->id, p, GT_GFP_ACCOUNT);
	if (ret)
		goto fail;
	if (!gt_probe_budget_take()) {
		xa_erase(&s->ids, p->id);
		ret = -ENOSPC;
		goto fail;
	}
	ret = register_probe(p);
	if (ret) {
		gt_probe_budget_put(1);
		xa_erase(&s->ids, p->id);
		goto fail;
	}
	s->next_id++;
	list_add_tail(&p->node, &s->probes);
	hash_add(s->sites, &p->site_node, site_key(p));
	s->nr_probes++;
	req->id = p->id;
	req->emu = p->emu;
	return 0;
fail:
	probe_free(p);
	return ret;
}

void gt_probes_remove_all(struct gt_session *s)
{
	struct gt_probe *p, *tmp;

	list_for_each_entry(p, &s->probes, node)
		gt_uprobe_unregister(file_inode(p->file), p->offset, &p->uc, p->uprobe);
	if (!list_empty(&s->probes))
		gt_uprobe_unregister_sync(); /* no handler of ours runs after this */
	list_for_each_entry_safe(p, tmp, &s->probes, node) {
		list_del(&p->node);
		hash_del(&p->site_node);
		xa_erase(&s->ids, p->id);
		probe_free(p);
	}
	gt_probe_budget_put(s->nr_probes);
	s->nr_probes = 0;
}
