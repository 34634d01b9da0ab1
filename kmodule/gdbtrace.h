/* SPDX-License-Identifier: GPL-2.0 */
/* gdbtrace.ko internals: sessions (one per open file), probes, rings. */
#ifndef GDBTRACE_INTERNAL_H
#define GDBTRACE_INTERNAL_H

#include <linux/atomic.h>
#include <linux/fs.h>
#include <linux/hashtable.h>
#include <linux/irq_work.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/uidgid.h>
#include <linux/wait.h>
#include <linux/xarray.h>

#include "ax/ax.h"
#include "compat.h"
#include "uapi/gdbtrace_uapi.h"

/* Per hit, all programs of a probe (condition, 'X' actions, and the reruns of
 * a TSV update that lost a race) share this many bytecode steps. Bounds the
 * time a hit spends with preemption off. */
#define GT_HIT_STEP_BUDGET 100000u
/* Distinct TSVs one program may name (its per-hit transaction, tsv.c). */
#define GT_TSV_TX_MAX 8
/* Probes (uprobe registrations) of all sessions together, and ADDs per user
 * (a burst, then a rate per second; uapi): each registration takes the kernel's global
 * dup_mmap_sem for writing (every fork waits for it) and walks every mm that
 * maps the inode. */
#define GT_MAX_PROBES_TOTAL GDBTRACE_MAX_PROBES_TOTAL
#define GT_ADD_RATE_PER_SEC GDBTRACE_ADD_RATE
#define GT_ADD_BURST GDBTRACE_ADD_BURST
/* Initialised sessions (each with its rings) one user may hold at once. */
#define GT_MAX_SESSIONS_PER_USER 8
/* Bytes of rings one session may allocate (all CPUs together). */
#define GT_MAX_RING_BYTES (256ul << 20)
/* Every allocation a caller's request sizes or repeats (session, rings,
 * scratch, TSVs, probes, programs): charged to the caller's memory cgroup,
 * and past its limit the request fails with ENOMEM after reclaim
 * (__GFP_RETRY_MAYFAIL) instead of waking the cgroup's OOM killer, which
 * would kill the stub or a neighbour for the size of a ring. */
#define GT_GFP_ACCOUNT (GFP_KERNEL_ACCOUNT | __GFP_RETRY_MAYFAIL | __GFP_NOWARN)

struct gt_session;

struct gt_action {
	u32 kind;
	u32 flags;              /* 'R': GDBTRACE_ACT_REGS_FPU */
	s32 basereg;
	s64 offset;
	u32 len;
	u8 *code;               /* 'X' */
	struct ax_verified info; /* 'X' */
};

struct gt_probe {
	struct list_head node;
	struct hlist_node site_node; /* in gt_session.sites */
	struct gt_session *s;
	struct uprobe_consumer uc;
	struct uprobe *uprobe;   /* what unregistering needs (compat.h) */
	struct file *file;       /* holds the inode */
	struct mm_struct *mm;    /* mmgrab()ed: compared only, never dereferenced */
	pid_t tgid;
	bool mm_64bit;          /* is_64bit_mm() at ADD: emulation is 64-bit only */
	u64 offset, address, pass_count;
	u32 id, tp;
	bool enabled;
	u8 *cond;
	struct ax_verified cond_info;
	u32 nr_actions;
	struct gt_action *actions;
	struct gdbtrace_emu emu; /* op != 0: decoded from the file's bytes at ADD */
	atomic64_t hits, frames, bytes, drops, errors, emulated;
};

struct gt_session {
	struct mutex lock; /* serialises ioctls; never taken under the mmap lock */
	/* Set (release) once INIT has filled in everything below up to `wq`, which
	 * stays fixed from then on: mmap and poll read it (acquire) without the lock. */
	bool initialized;
	kuid_t owner;      /* counted against GT_MAX_SESSIONS_PER_USER from INIT */
	u32 regblock_size;
	u32 nr_rings;
	size_t ring_stride, data_size, area_size;
	struct page **pages; /* the rings' pages (memcg-accounted), mmap'ed by the stub */
	unsigned long nr_pages;
	void *area;     /* vmap of pages */
	wait_queue_head_t wq;
	/* Hits wake the stub through this: the hit path runs with preemption
	 * off, where a wait-queue lock (a sleeping lock on PREEMPT_RT) may not
	 * be taken. */
	struct irq_work wake_work;
	atomic_t running;
	atomic64_t seq; /* frame order across the per-CPU rings */
	u32 stop_reason, stop_tp;
	struct list_head probes;
	u32 nr_probes, next_id;
	/* ADD rate limit: a window start (jiffies) and the ADDs made in it. */
	unsigned long add_window;
	u32 adds_in_window;
	/* Lookups that stay cheap with thousands of probes: by id (every ioctl
	 * naming one), and by site (mm, inode, offset) when a probe is added. */
	struct xarray ids;
	DECLARE_HASHTABLE(sites, 10);
	/* GDBTRACE_MAX_TSVS values, each updated with one atomic operation
	 * (tsv.c): no lock is held across a program. */
	atomic64_t *tsv;
	unsigned long *tsv_defined; /* bitmap; a bit is never cleared */
};

/* What one program did to TSVs during one evaluation (tsv.c). */
struct gt_tsv_tx {
	u32 nr;
	struct {
		u32 num;
		bool read, written, done;
		s64 seen;  /* value read from the session */
		s64 value; /* the program's view: seen, or what it wrote */
	} e[GT_TSV_TX_MAX];
};

static inline struct gdbtrace_ring_header *gt_ring_header(struct gt_session *s, u32 i)
{
	return (struct gdbtrace_ring_header *)((u8 *)s->area + (size_t)i * s->ring_stride);
}

/* probe.c */
int gt_probe_add(struct gt_session *s, struct gdbtrace_probe_add *req);
void gt_probes_remove_all(struct gt_session *s);
struct gt_probe *gt_probe_find(struct gt_session *s, u32 id);

/* fpu.c */
void gt_put_fpu_regs(u8 *block, u32 regblock_size);

/* tsv.c */
int gt_tsv_get(struct gt_session *s, struct gt_tsv_tx *tx, u32 num, s64 *value);
int gt_tsv_set(struct gt_session *s, struct gt_tsv_tx *tx, u32 num, s64 value);
bool gt_tsv_commit(struct gt_session *s, struct gt_tsv_tx *tx);
void gt_tsv_begin(struct gt_tsv_tx *tx, bool first);

/* selftest.c: whether this kernel skips the single-step after a handler
 * moved ip, decided at module load by running an emulated instruction. */
enum gt_emu_state { GT_EMU_UNTESTED, GT_EMU_OK, GT_EMU_DOUBLE, GT_EMU_FAILED };
extern enum gt_emu_state gt_emu_state;
void gt_emu_selftest(void);

/* main.c: the probe budget over all sessions. */
bool gt_probe_budget_take(void);
int gt_add_throttle(kuid_t uid);
void gt_probe_budget_put(unsigned int n);

/* collect.c */
void gt_collect(struct gt_probe *p, struct pt_regs *regs);
int gt_verify_code(struct gt_session *s, const u8 *code, u32 len, int allow_trace,
		   struct ax_verified *out);

/* main.c: one frame-assembly area per CPU, shared by all sessions (a hit runs
 * with preemption off, and uprobe handlers do not nest). Valid while the
 * calling session is initialised. */
u8 *gt_scratch(unsigned int cpu);

#endif
