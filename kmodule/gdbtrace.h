/* SPDX-License-Identifier: GPL-2.0 */
/* gdbtrace.ko internals: sessions (one per open file), probes, rings. */
#ifndef GDBTRACE_INTERNAL_H
#define GDBTRACE_INTERNAL_H

#include <linux/atomic.h>
#include <linux/fs.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/uprobes.h>
#include <linux/version.h>
#include <linux/wait.h>

#include "ax/ax.h"
#include "uapi/gdbtrace_uapi.h"

struct gt_session;

struct gt_action {
	u32 kind;
	s32 basereg;
	s64 offset;
	u32 len;
	u8 *code;               /* 'X' */
	struct ax_verified info; /* 'X' */
};

struct gt_probe {
	struct list_head node;
	struct gt_session *s;
	struct uprobe_consumer uc;
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 12, 0)
	struct uprobe *uprobe;
#endif
	struct file *file;       /* holds the inode */
	struct mm_struct *mm;    /* mmgrab()ed: compared only, never dereferenced */
	pid_t tgid;
	u64 offset, address, pass_count;
	u32 id, tp;
	bool enabled;
	u8 *cond;
	struct ax_verified cond_info;
	u32 nr_actions;
	struct gt_action *actions;
	struct gdbtrace_emu emu; /* op != 0: verified against the file's bytes */
	atomic64_t hits, frames, bytes, drops, errors, emulated;
};

struct gt_session {
	struct mutex lock; /* serialises ioctls */
	bool initialized;
	u32 regblock_size;
	u32 nr_rings;
	size_t ring_stride, data_size, area_size;
	void *area;     /* vmalloc_user: rings, mmap'ed by the stub */
	u8 *scratch;    /* nr_cpu_ids * GDBTRACE_MAX_FRAME: per-CPU frame assembly */
	wait_queue_head_t wq;
	atomic_t running;
	atomic64_t seq; /* frame order across the per-CPU rings */
	u32 stop_reason, stop_tp;
	struct list_head probes;
	u32 nr_probes, next_id;
	atomic64_t *tsv;           /* GDBTRACE_MAX_TSVS values */
	unsigned long *tsv_defined; /* bitmap */
};

/* probe.c */
int gt_probe_add(struct gt_session *s, struct gdbtrace_probe_add *req);
void gt_probes_remove_all(struct gt_session *s);
struct gt_probe *gt_probe_find(struct gt_session *s, u32 id);

/* collect.c */
void gt_collect(struct gt_probe *p, struct pt_regs *regs);
int gt_verify_code(struct gt_session *s, const u8 *code, u32 len, int allow_trace,
		   struct ax_verified *out);

/* main.c */
extern bool (*gt_ptrace_may_access)(struct task_struct *task, unsigned int mode);

#endif
