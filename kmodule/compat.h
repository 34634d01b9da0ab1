/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Every kernel-version difference gdbtrace.ko deals with, in one place.
 * Supported: 6.1 (Debian 12) through the newest mainline (7.x); the QEMU
 * harness (tests/qemu/run.sh) builds and runs the module on 6.1, 6.12 and
 * Debian unstable's kernel.
 *
 *   6.3   vm_flags became read-only: vm_flags_clear()/vm_flags_set().
 *   6.12  uprobe_register(inode, off, ref_ctr, uc) returns the struct uprobe *;
 *         unregistering is uprobe_unregister_nosync() + one uprobe_unregister_sync();
 *         the consumer filter lost its ctx argument.
 *   6.13  the consumer handler gained a `__u64 *data` argument (session data).
 *   6.16  rdmsrl() was renamed rdmsrq(); struct fpu left thread_struct
 *         (x86_task_fpu()).
 *   7.x   shmem_file_setup() takes a vma_flags_t (EMPTY_VMA_FLAGS);
 *         dumpability and its user namespace left the mm for the task's
 *         exec_state (<linux/sched/exec_state.h>; tested by the header's
 *         presence, the release that moved it is not pinned here).
 */
#ifndef GDBTRACE_COMPAT_H
#define GDBTRACE_COMPAT_H

#include <linux/mm.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/sched/coredump.h>
#include <linux/uprobes.h>
#include <linux/user_namespace.h>
#include <linux/version.h>
#include <asm/fpu/types.h>
#include <asm/msr.h>

#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 1, 0)
#error "gdbtrace.ko needs Linux 6.1 or newer"
#endif

/* Whether the kernel skips the out-of-line single-step after a handler
 * moved regs->ip (upstream 4363264111e1, 6.18 cycle, backported to some
 * stable series only) is not a version question: selftest.c asks the
 * running kernel at load. */

#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 12, 0)
#define GT_UPROBE_HANDLE 1 /* struct gt_probe keeps the struct uprobe * */
#endif

/* Handler and filter prototypes: declare them with these macros. */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 13, 0)
#define GT_UPROBE_HANDLER(name, uc, regs) \
	int name(struct uprobe_consumer *uc, struct pt_regs *regs, __u64 *data)
#else
#define GT_UPROBE_HANDLER(name, uc, regs) int name(struct uprobe_consumer *uc, struct pt_regs *regs)
#endif

#ifdef GT_UPROBE_HANDLE
#define GT_UPROBE_FILTER(name, uc, mm) bool name(struct uprobe_consumer *uc, struct mm_struct *mm)
#else
#define GT_UPROBE_FILTER(name, uc, mm) \
	bool name(struct uprobe_consumer *uc, enum uprobe_filter_ctx ctx, struct mm_struct *mm)
#endif

/* Register UC at OFFSET of INODE; *HANDLE gets what unregistering needs. */
static inline int gt_uprobe_register(struct inode *inode, loff_t offset, struct uprobe_consumer *uc,
				     struct uprobe **handle)
{
#ifdef GT_UPROBE_HANDLE
	struct uprobe *u = uprobe_register(inode, offset, 0, uc);

	if (IS_ERR(u))
		return PTR_ERR(u);
	*handle = u;
	return 0;
#else
	*handle = NULL;
	return uprobe_register(inode, offset, uc);
#endif
}

/* Start unregistering; gt_uprobe_unregister_sync() waits for every handler. */
static inline void gt_uprobe_unregister(struct inode *inode, loff_t offset, struct uprobe_consumer *uc,
					struct uprobe *handle)
{
#ifdef GT_UPROBE_HANDLE
	uprobe_unregister_nosync(handle, uc);
#else
	/* Synchronous on these kernels: waits for running handlers (register_rwsem). */
	uprobe_unregister(inode, offset, uc);
#endif
}

static inline void gt_uprobe_unregister_sync(void)
{
#ifdef GT_UPROBE_HANDLE
	uprobe_unregister_sync();
#endif
}

static inline void gt_vm_flags_clear(struct vm_area_struct *vma, vm_flags_t flags)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 3, 0)
	vm_flags_clear(vma, flags);
#else
	vma->vm_flags &= ~flags;
#endif
}

static inline void gt_vm_flags_set(struct vm_area_struct *vma, vm_flags_t flags)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 3, 0)
	vm_flags_set(vma, flags);
#else
	vma->vm_flags |= flags;
#endif
}

/* The task's FPU state. From 6.16 struct fpu follows task_struct in the same
 * allocation (x86_task_fpu); Debian builds with CONFIG_X86_DEBUG_FPU, where
 * x86_task_fpu is an unexported function, so its non-debug form is used. */
static inline struct fpstate *gt_task_fpstate(struct task_struct *t)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 16, 0)
	return ((struct fpu *)((void *)t + sizeof(*t)))->fpstate;
#else
	return t->thread.fpu.fpstate;
#endif
}

/* No VM_NORESERVE etc. for selftest.c's shmem file: an int 0 before 7.x,
 * the empty vma_flags_t since (tested by the macro's presence). */
#ifdef EMPTY_VMA_FLAGS
#define GT_SHMEM_NO_FLAGS EMPTY_VMA_FLAGS
#else
#define GT_SHMEM_NO_FLAGS 0
#endif

#if __has_include(<linux/sched/exec_state.h>)
#include <linux/sched/exec_state.h>
#define GT_TASK_EXEC_STATE 1
#endif

/* Whether T's image (address space MM) may be read by a tracer with the
 * same ids (the owner-dumpable state), and the user namespace a tracer needs
 * CAP_SYS_PTRACE over otherwise: *NS gets a reference (put_user_ns()). */
static inline bool gt_owner_dumpable(struct task_struct *t, struct mm_struct *mm,
				     struct user_namespace **ns)
{
#ifdef GT_TASK_EXEC_STATE
	struct task_exec_state *es;
	bool owner;

	rcu_read_lock();
	es = rcu_dereference(t->exec_state);
	owner = es->dumpable == TASK_DUMPABLE_OWNER;
	*ns = get_user_ns(es->user_ns);
	rcu_read_unlock();
	return owner;
#else
	*ns = get_user_ns(mm->user_ns);
	return get_dumpable(mm) == SUID_DUMP_USER;
#endif
}

static inline u64 gt_rdmsr(u32 msr)
{
	u64 v;

#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 16, 0)
	rdmsrq(msr, v);
#else
	rdmsrl(msr, v);
#endif
	return v;
}

#endif
