// SPDX-License-Identifier: GPL-2.0
/*
 * gdbtrace.ko: uprobe-based tracepoint collector for gdbtrace-server.
 *
 * /dev/gdbtrace (0600). One open file = one session: its probes, its rings
 * (mmap'ed by the stub) and its trace state variables. Releasing the file
 * (close, or the stub dying) unregisters every probe of the session, which
 * restores the original instruction in every process. Who may probe what:
 * see probe.c (the caller must already be the target's ptracer) and README.md.
 */
#include <linux/delay.h>
#include <linux/irq_work.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/nospec.h>
#include <linux/poll.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>

#include "abi/amd64_regs.h"
#include "gdbtrace.h"

/* Shared state of all sessions, under gt_global_lock: the per-CPU scratch
 * areas (allocated with the first initialised session, freed with the last)
 * and how many initialised sessions each user holds. */
static DEFINE_MUTEX(gt_global_lock);
static u8 **gt_scratch_areas;
static unsigned int gt_nr_sessions;

struct gt_user {
	struct list_head node;
	kuid_t uid;
	unsigned int sessions;
	/* ADD throttle over all the user's sessions, a token bucket: credit
	 * in 1/HZ ADDs (an ADD costs HZ, a jiffy earns GT_ADD_RATE_PER_SEC, at
	 * most GT_ADD_BURST ADDs' worth), as of jiffy refill_at. */
	u64 add_credit;
	unsigned long refill_at;
};
static LIST_HEAD(gt_users);

/* Registered probes of all sessions (gt_probe_budget_take). */
static atomic_t gt_probes_total = ATOMIC_INIT(0);

bool gt_probe_budget_take(void)
{
	return atomic_add_unless(&gt_probes_total, 1, GT_MAX_PROBES_TOTAL);
}

void gt_probe_budget_put(unsigned int n)
{
	atomic_sub(n, &gt_probes_total);
}

u8 *gt_scratch(unsigned int cpu)
{
	return gt_scratch_areas[cpu];
}

static void scratch_free(void)
{
	unsigned int cpu;

	for_each_possible_cpu(cpu)
		kvfree(gt_scratch_areas[cpu]);
	kfree(gt_scratch_areas);
	gt_scratch_areas = NULL;
}

static int scratch_alloc(void)
{
	unsigned int cpu;

	/* Charged to the memory cgroup of the session that needed them first. */
	gt_scratch_areas = kcalloc(nr_cpu_ids, sizeof(*gt_scratch_areas), GT_GFP_ACCOUNT);
	if (!gt_scratch_areas)
		return -ENOMEM;
	for_each_possible_cpu(cpu) {
		gt_scratch_areas[cpu] = kvzalloc_node(GDBTRACE_MAX_FRAME, GT_GFP_ACCOUNT,
						      cpu_to_node(cpu));
		if (!gt_scratch_areas[cpu]) {
			scratch_free();
			return -ENOMEM;
		}
	}
	return 0;
}

#define GT_ADD_CREDIT_MAX ((u64)GT_ADD_BURST * HZ)

static void add_credit_refill(struct gt_user *u, unsigned long now)
{
	unsigned long elapsed = now - u->refill_at;

	/* Past the time a full refill takes, the product could overflow. */
	if (elapsed > (unsigned long)(GT_ADD_BURST / GT_ADD_RATE_PER_SEC + 1) * HZ)
		u->add_credit = GT_ADD_CREDIT_MAX;
	else
		u->add_credit = min_t(u64, GT_ADD_CREDIT_MAX,
				      u->add_credit + (u64)elapsed * GT_ADD_RATE_PER_SEC);
	u->refill_at = now;
}

/* A user whose last session closed is kept until its bucket is full again:
 * closing and reopening the device must not refill it. Under gt_global_lock. */
static void users_prune(void)
{
	struct gt_user *u, *next;
	unsigned long now = jiffies;

	list_for_each_entry_safe(u, next, &gt_users, node) {
		if (u->sessions)
			continue;
		add_credit_refill(u, now);
		if (u->add_credit == GT_ADD_CREDIT_MAX) {
			list_del(&u->node);
			kfree(u);
		}
	}
}

static struct gt_user *user_find(kuid_t uid)
{
	struct gt_user *u;

	list_for_each_entry(u, &gt_users, node)
		if (uid_eq(u->uid, uid))
			return u;
	return NULL;
}

/* Count a new initialised session of UID: -EMFILE past the per-user cap. */
static int session_account(kuid_t uid)
{
	struct gt_user *u;
	int ret = 0;

	mutex_lock(&gt_global_lock);
	users_prune();
	u = user_find(uid);
	if (!u) {
		u = kzalloc(sizeof(*u), GFP_KERNEL);
		if (!u) {
			ret = -ENOMEM;
			goto out;
		}
		u->uid = uid;
		u->add_credit = GT_ADD_CREDIT_MAX;
		u->refill_at = jiffies;
		list_add(&u->node, &gt_users);
	}
	if (u->sessions >= GT_MAX_SESSIONS_PER_USER) {
		ret = -EMFILE;
		goto out;
	}
	if (!gt_nr_sessions) {
		ret = scratch_alloc();
		if (ret)
			goto out;
	}
	gt_nr_sessions++;
	u->sessions++;
out:
	if (u && !u->sessions && u->add_credit == GT_ADD_CREDIT_MAX) {
		list_del(&u->node);
		kfree(u);
	}
	mutex_unlock(&gt_global_lock);
	return ret;
}

/* ADD's rate bound, per user over all the user's sessions: a burst of
 * GT_ADD_BURST (a whole library's tracepoints at one tstart), then
 * GT_ADD_RATE_PER_SEC sustained. Past it the caller sleeps until its next
 * ADD is earned (interruptible), so a stub adding tens of thousands of
 * tracepoints is slowed, not failed, while the kernel's dup_mmap_sem (taken
 * for writing by every registration, waited for by every fork) is never
 * hammered for long by one user. */
int gt_add_throttle(kuid_t uid)
{
	struct gt_user *u;
	unsigned long wait;

	for (;;) {
		mutex_lock(&gt_global_lock);
		u = user_find(uid);
		if (WARN_ON_ONCE(!u)) {
			mutex_unlock(&gt_global_lock);
			return -EINVAL;
		}
		add_credit_refill(u, jiffies);
		if (u->add_credit >= HZ) {
			u->add_credit -= HZ;
			mutex_unlock(&gt_global_lock);
			return 0;
		}
		wait = DIV_ROUND_UP(HZ - u->add_credit, GT_ADD_RATE_PER_SEC);
		mutex_unlock(&gt_global_lock);
		if (schedule_timeout_interruptible(wait) || signal_pending(current))
			return -ERESTARTSYS;
	}
}

static void session_unaccount(kuid_t uid)
{
	struct gt_user *u;

	mutex_lock(&gt_global_lock);
	u = user_find(uid);
	/* A user left without sessions stays until its bucket refills (users_prune). */
	if (!WARN_ON_ONCE(!u))
		u->sessions--;
	if (--gt_nr_sessions == 0)
		scratch_free();
	mutex_unlock(&gt_global_lock);
}

static void rings_free(struct gt_session *s)
{
	unsigned long i;

	if (s->area)
		vunmap(s->area);
	for (i = 0; s->pages && i < s->nr_pages; i++)
		if (s->pages[i])
			__free_page(s->pages[i]);
	kvfree(s->pages);
	s->area = NULL;
	s->pages = NULL;
}

/* The rings are zeroed pages charged to the caller's memory cgroup, mapped
 * contiguously for the kernel (vmap) and for the stub (vm_map_pages). */
static int rings_alloc(struct gt_session *s, size_t total)
{
	unsigned long i;

	s->nr_pages = total >> PAGE_SHIFT;
	s->pages = kvcalloc(s->nr_pages, sizeof(*s->pages), GT_GFP_ACCOUNT);
	if (!s->pages)
		return -ENOMEM;
	for (i = 0; i < s->nr_pages; i++) {
		s->pages[i] = alloc_page(GT_GFP_ACCOUNT | __GFP_ZERO);
		if (!s->pages[i])
			goto nomem;
	}
	s->area = vmap(s->pages, s->nr_pages, VM_MAP, PAGE_KERNEL);
	if (!s->area)
		goto nomem;
	return 0;
nomem:
	rings_free(s);
	return -ENOMEM;
}

/* Deferred from the hit path (ring half full, pass count reached). */
static void gt_wake(struct irq_work *w)
{
	struct gt_session *s = container_of(w, struct gt_session, wake_work);

	wake_up_interruptible(&s->wq);
}

static int gt_open(struct inode *inode, struct file *f)
{
	struct gt_session *s = kzalloc(sizeof(*s), GT_GFP_ACCOUNT);

	if (!s)
		return -ENOMEM;
	mutex_init(&s->lock);
	init_waitqueue_head(&s->wq);
	init_irq_work(&s->wake_work, gt_wake);
	INIT_LIST_HEAD(&s->probes);
	xa_init(&s->ids);
	hash_init(s->sites);
	s->next_id = 1;
	f->private_data = s;
	return 0;
}

static int gt_release(struct inode *inode, struct file *f)
{
	struct gt_session *s = f->private_data;

	atomic_set(&s->running, 0);
	gt_probes_remove_all(s); /* no handler runs after this */
	irq_work_sync(&s->wake_work); /* nor a wake-up a handler queued */
	xa_destroy(&s->ids);
	if (s->initialized) {
		rings_free(s);
		kvfree(s->tsv);
		bitmap_free(s->tsv_defined);
		session_unaccount(s->owner);
	}
	kfree(s);
	return 0;
}

static long do_init(struct gt_session *s, void __user *arg)
{
	struct gdbtrace_init in;
	u32 i, ring_shift;
	size_t data, stride, total;
	int ret;

	if (copy_from_user(&in, arg, sizeof(in)))
		return -EFAULT;
	if (in.version != GDBTRACE_UAPI_VERSION)
		return -EPROTO;
	if (s->initialized)
		return -EBUSY;
	if (in.regblock_size != GT_REGBLOCK_SIZE_NOAVX &&
	    in.regblock_size != GT_REGBLOCK_SIZE_AVX)
		return -EINVAL;
	ring_shift = in.ring_shift;
	if (ring_shift < GDBTRACE_MIN_RING_SHIFT || ring_shift > GDBTRACE_MAX_RING_SHIFT)
		return -EINVAL;
	data = (size_t)1 << ring_shift;
	stride = PAGE_SIZE + data;
	if ((u64)nr_cpu_ids * stride > GT_MAX_RING_BYTES)
		return -E2BIG;
	total = (size_t)nr_cpu_ids * stride;

	s->owner = current_uid();
	ret = session_account(s->owner);
	if (ret)
		return ret;
	ret = rings_alloc(s, total);
	s->tsv = kvcalloc(GDBTRACE_MAX_TSVS, sizeof(*s->tsv), GT_GFP_ACCOUNT);
	s->tsv_defined = kcalloc(BITS_TO_LONGS(GDBTRACE_MAX_TSVS), sizeof(long), GT_GFP_ACCOUNT);
	if (ret || !s->tsv || !s->tsv_defined) {
		rings_free(s);
		kvfree(s->tsv);
		kfree(s->tsv_defined);
		s->tsv = NULL;
		s->tsv_defined = NULL;
		session_unaccount(s->owner);
		return -ENOMEM;
	}
	s->regblock_size = in.regblock_size;
	s->nr_rings = nr_cpu_ids;
	s->ring_stride = stride;
	s->data_size = data;
	s->area_size = total;
	for (i = 0; i < s->nr_rings; i++) {
		struct gdbtrace_ring_header *h = gt_ring_header(s, i);

		h->data_size = data;
		h->data_offset = PAGE_SIZE;
	}
	smp_store_release(&s->initialized, true);

	in.nr_rings = s->nr_rings;
	in.ring_stride = stride;
	in.mmap_size = total;
	in.features = GDBTRACE_FEAT_FPU;
	switch (gt_emu_state) {
	case GT_EMU_OK:
		in.features |= GDBTRACE_FEAT_EMULATE;
		break;
	case GT_EMU_DOUBLE:
		in.features |= GDBTRACE_FEAT_EMU_DOUBLE;
		break;
	default:
		in.features |= GDBTRACE_FEAT_EMU_UNTESTED;
	}
	/* GPRs, rip, eflags, segment selectors; orig_rax, fs_base, gs_base. */
	in.reg_valid = 0x00ffffffu;
	in.reg_valid_hi = (1u << (57 - 32)) | (1u << (58 - 32)) | (1u << (59 - 32));
	in.reserved = 0;
	if (copy_to_user(arg, &in, sizeof(in)))
		return -EFAULT;
	return 0;
}

static long do_tsv(struct gt_session *s, void __user *arg, bool set)
{
	struct gdbtrace_tsv t;

	if (copy_from_user(&t, arg, sizeof(t)))
		return -EFAULT;
	if (t.num >= GDBTRACE_MAX_TSVS)
		return -EINVAL;
	t.num = array_index_nospec(t.num, GDBTRACE_MAX_TSVS);
	if (set) {
		if (t.flags & ~GDBTRACE_TSV_DEFINE)
			return -EINVAL;
		if (!(t.flags & GDBTRACE_TSV_DEFINE) && !test_bit(t.num, s->tsv_defined))
			return -ENOENT;
		/* The value first: a hit that sees the bit defined reads it. */
		atomic64_set(&s->tsv[t.num], t.value);
		smp_mb__before_atomic();
		set_bit(t.num, s->tsv_defined);
		return 0;
	}
	if (t.flags)
		return -EINVAL;
	if (!test_bit(t.num, s->tsv_defined))
		return -ENOENT;
	t.value = atomic64_read(&s->tsv[t.num]);
	t.flags = GDBTRACE_TSV_DEFINED;
	return copy_to_user(arg, &t, sizeof(t)) ? -EFAULT : 0;
}

static long do_probe_status(struct gt_session *s, void __user *arg)
{
	struct gdbtrace_probe_status st;
	struct gt_probe *p;

	if (copy_from_user(&st, arg, sizeof(st)))
		return -EFAULT;
	p = gt_probe_find(s, st.id);
	if (!p)
		return -ENOENT;
	memset(&st, 0, sizeof(st));
	st.id = p->id;
	st.flags = (READ_ONCE(p->enabled) ? GDBTRACE_PST_ENABLED : 0) |
		   (p->emu.op ? GDBTRACE_PST_EMULATING : 0);
	st.hits = atomic64_read(&p->hits);
	st.frames = atomic64_read(&p->frames);
	st.bytes = atomic64_read(&p->bytes);
	st.drops = atomic64_read(&p->drops);
	st.errors = atomic64_read(&p->errors);
	st.emulated = atomic64_read(&p->emulated);
	return copy_to_user(arg, &st, sizeof(st)) ? -EFAULT : 0;
}

static long do_status(struct gt_session *s, void __user *arg)
{
	struct gdbtrace_session_status st = {};
	u32 i;

	st.running = atomic_read(&s->running);
	st.stop_reason = READ_ONCE(s->stop_reason);
	st.stop_tp = READ_ONCE(s->stop_tp);
	st.nr_probes = s->nr_probes;
	for (i = 0; i < s->nr_rings; i++)
		st.drops += READ_ONCE(gt_ring_header(s, i)->drops);
	return copy_to_user(arg, &st, sizeof(st)) ? -EFAULT : 0;
}

static long gt_ioctl_locked(struct gt_session *s, unsigned int cmd, void __user *arg)
{
	if (cmd == GDBTRACE_IOC_INIT)
		return do_init(s, arg);
	if (!s->initialized)
		return -ENOTCONN;

	switch (cmd) {
	case GDBTRACE_IOC_ADD: {
		struct gdbtrace_probe_add req;
		long ret;

		if (copy_from_user(&req, arg, sizeof(req)))
			return -EFAULT;
		ret = gt_probe_add(s, &req);
		if (ret)
			return ret;
		/* The probe is live; report its id (a failed copy leaves it installed,
		 * which close() still cleans up). */
		return copy_to_user(arg, &req, sizeof(req)) ? -EFAULT : 0;
	}
	case GDBTRACE_IOC_ENABLE: {
		struct gdbtrace_probe_enable e;
		struct gt_probe *p;

		if (copy_from_user(&e, arg, sizeof(e)))
			return -EFAULT;
		if (e.enable > 1)
			return -EINVAL;
		p = gt_probe_find(s, e.id);
		if (!p)
			return -ENOENT;
		WRITE_ONCE(p->enabled, e.enable);
		return 0;
	}
	case GDBTRACE_IOC_START:
		WRITE_ONCE(s->stop_reason, GDBTRACE_STOP_NONE);
		WRITE_ONCE(s->stop_tp, 0);
		atomic_set(&s->running, 1);
		return 0;
	case GDBTRACE_IOC_STOP:
		if (atomic_xchg(&s->running, 0))
			WRITE_ONCE(s->stop_reason, GDBTRACE_STOP_REQUESTED);
		wake_up_interruptible(&s->wq);
		return 0;
	case GDBTRACE_IOC_PROBE_STATUS:
		return do_probe_status(s, arg);
	case GDBTRACE_IOC_STATUS:
		return do_status(s, arg);
	case GDBTRACE_IOC_TSV_SET:
		return do_tsv(s, arg, true);
	case GDBTRACE_IOC_TSV_GET:
		return do_tsv(s, arg, false);
	case GDBTRACE_IOC_REMOVE_ALL:
		atomic_set(&s->running, 0);
		gt_probes_remove_all(s);
		return 0;
	}
	return -ENOTTY;
}

static long gt_ioctl(struct file *f, unsigned int cmd, unsigned long arg)
{
	struct gt_session *s = f->private_data;
	long ret;

	if (_IOC_TYPE(cmd) != GDBTRACE_IOC_MAGIC)
		return -ENOTTY;
	if (mutex_lock_interruptible(&s->lock))
		return -ERESTARTSYS;
	ret = gt_ioctl_locked(s, cmd, (void __user *)arg);
	mutex_unlock(&s->lock);
	return ret;
}

/* Runs under the caller's mmap lock: takes no session lock (ADD holds that
 * across uprobe_register(), which takes mmap locks). Everything read here is
 * fixed once `initialized` is seen set. */
static int gt_mmap(struct file *f, struct vm_area_struct *vma)
{
	struct gt_session *s = f->private_data;
	unsigned long len = vma->vm_end - vma->vm_start;

	if (!smp_load_acquire(&s->initialized))
		return -ENOTCONN;
	if (vma->vm_pgoff != 0 || len > PAGE_ALIGN(s->area_size))
		return -EINVAL;
	/* The stub writes each ring's tail: a private copy would never be seen. */
	if (!(vma->vm_flags & VM_SHARED))
		return -EINVAL;
	if (vma->vm_flags & VM_EXEC)
		return -EPERM;
	gt_vm_flags_clear(vma, VM_MAYEXEC);
	gt_vm_flags_set(vma, VM_DONTEXPAND | VM_DONTDUMP);
	return vm_map_pages(vma, s->pages, s->nr_pages);
}

static bool rings_pending(struct gt_session *s)
{
	u32 i;

	for (i = 0; i < s->nr_rings; i++) {
		struct gdbtrace_ring_header *h = gt_ring_header(s, i);

		if (smp_load_acquire(&h->head) != READ_ONCE(h->tail))
			return true;
	}
	return false;
}

static __poll_t gt_poll(struct file *f, poll_table *wait)
{
	struct gt_session *s = f->private_data;
	__poll_t mask = 0;

	if (!smp_load_acquire(&s->initialized))
		return EPOLLERR;
	poll_wait(f, &s->wq, wait);
	/* Readable while frames are pending. A pass-count stop also wakes the
	 * waiters; the stub reads STATUS when it drains. (No level-triggered
	 * "stopped" bit: it would keep a poll loop spinning.) */
	if (rings_pending(s))
		mask |= EPOLLIN | EPOLLRDNORM;
	return mask;
}

static const struct file_operations gt_fops = {
	.owner = THIS_MODULE,
	.open = gt_open,
	.release = gt_release,
	.unlocked_ioctl = gt_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.mmap = gt_mmap,
	.poll = gt_poll,
	.llseek = noop_llseek,
};

static struct miscdevice gt_dev = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "gdbtrace",
	.fops = &gt_fops,
	.mode = 0600,
};

static int __init gt_init(void)
{
	int ret;

	gt_emu_selftest();
	ret = misc_register(&gt_dev);
	if (ret)
		return ret;
	pr_info("gdbtrace: /dev/gdbtrace ready (uapi %d, emulation %s)\n", GDBTRACE_UAPI_VERSION,
		gt_emu_state == GT_EMU_OK ? "on" :
		gt_emu_state == GT_EMU_DOUBLE ? "off: this kernel single-steps after a moved ip" :
		"off: self-test failed");
	return 0;
}

static void __exit gt_exit(void)
{
	struct gt_user *u, *next;

	misc_deregister(&gt_dev);
	/* No session is left (each holds a module reference): only users kept
	 * for their buckets. */
	list_for_each_entry_safe(u, next, &gt_users, node) {
		list_del(&u->node);
		kfree(u);
	}
}

module_init(gt_init);
module_exit(gt_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("gdbtrace: uprobe tracepoint collector for gdbtrace-server");
#ifndef GDBTRACE_VERSION
#error "GDBTRACE_VERSION is not set: build through kmodule/Makefile or pass GDBTRACE_VERSION=x.y.z"
#endif
MODULE_VERSION(GDBTRACE_VERSION);
