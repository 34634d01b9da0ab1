// SPDX-License-Identifier: GPL-2.0
/*
 * Does this kernel skip the out-of-line single-step when a uprobe handler
 * moved ip? Upstream 4363264111e1 made it do so (6.18 cycle); only some
 * stable series got the backport, and distributions carry their own
 * patches, so no version number answers the question. Emulating an
 * instruction where the kernel then also single-steps it runs the
 * instruction twice in the tracee. So the module asks the running kernel,
 * once, at load: it writes a tiny static program into a private shmem
 * file, probes that file's `add $1, %rdi` with a handler that emulates it
 * as a tracepoint would, runs the program as a user-mode helper and reads
 * its exit status, which is %rdi: 1 when the instruction ran once, 2 when
 * the kernel single-stepped it after the emulation. Only 1, with the
 * handler seen emulating, turns emulation on (gt_emu_state); anything else
 * leaves it off, and INIT's features and ADD's EOPNOTSUPP say so.
 *
 * The file is private to this test (no path, never mapped elsewhere), so
 * the probe fires in the helper only.
 */
#include <linux/elf.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/shmem_fs.h>
#include <linux/slab.h>
#include <linux/umh.h>
#include <linux/uprobes.h>

#include "gdbtrace.h"
#include "x86/emulate.h"

enum gt_emu_state gt_emu_state = GT_EMU_UNTESTED;

#define ST_VADDR 0x400000ul
#define ST_CODE_OFF (sizeof(Elf64_Ehdr) + sizeof(Elf64_Phdr))
#define ST_PROBE_OFF (ST_CODE_OFF + 2) /* after the xor */

static const u8 st_code[] = {
	0x31, 0xff,                   /* xor %edi, %edi */
	0x48, 0x83, 0xc7, 0x01,       /* add $1, %rdi: probed and emulated */
	0xb8, 0x3c, 0x00, 0x00, 0x00, /* mov $60 (exit), %eax */
	0x0f, 0x05,                   /* syscall: exit(%rdi) */
};

struct gt_selftest {
	struct uprobe_consumer uc;
	struct gdbtrace_emu emu;
	struct file *file;
	atomic_t emulated;
	char exe[32];
};

static GT_UPROBE_HANDLER(st_handler, uc, regs)
{
	struct gt_selftest *st = container_of(uc, struct gt_selftest, uc);

	if (regs->ip == ST_VADDR + ST_PROBE_OFF && gt_emu_apply(&st->emu, regs))
		atomic_inc(&st->emulated);
	return 0;
}

/* The helper's image: one PT_LOAD of the whole file, entry at the code. */
static int st_write_image(struct file *f)
{
	size_t size = ST_CODE_OFF + sizeof(st_code);
	u8 *img = kzalloc(size, GFP_KERNEL);
	Elf64_Ehdr *eh = (Elf64_Ehdr *)img;
	Elf64_Phdr *ph = (Elf64_Phdr *)(img + sizeof(*eh));
	loff_t pos = 0;
	ssize_t n;

	if (!img)
		return -ENOMEM;
	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_ident[EI_VERSION] = EV_CURRENT;
	eh->e_type = ET_EXEC;
	eh->e_machine = EM_X86_64;
	eh->e_version = EV_CURRENT;
	eh->e_entry = ST_VADDR + ST_CODE_OFF;
	eh->e_phoff = sizeof(*eh);
	eh->e_ehsize = sizeof(*eh);
	eh->e_phentsize = sizeof(*ph);
	eh->e_phnum = 1;
	ph->p_type = PT_LOAD;
	ph->p_flags = PF_R | PF_X;
	ph->p_vaddr = ST_VADDR;
	ph->p_paddr = ST_VADDR;
	ph->p_filesz = size;
	ph->p_memsz = size;
	ph->p_align = PAGE_SIZE;
	memcpy(img + ST_CODE_OFF, st_code, sizeof(st_code));
	n = kernel_write(f, img, size, &pos);
	kfree(img);
	return n == size ? 0 : (n < 0 ? n : -EIO);
}

/* In the helper task, before its exec: give it the file as a descriptor and
 * exec that (the file has no path of its own). */
static int st_umh_init(struct subprocess_info *info, struct cred *new)
{
	struct gt_selftest *st = info->data;
	int fd = get_unused_fd_flags(0);

	if (fd < 0)
		return fd;
	fd_install(fd, get_file(st->file));
	snprintf(st->exe, sizeof(st->exe), "/proc/self/fd/%d", fd);
	info->path = st->exe;
	return 0;
}

/* Runs the helper; returns its wait status or a negative errno. */
static int st_run_helper(struct gt_selftest *st)
{
	static char *argv[] = { "gdbtrace-emu-selftest", NULL };
	static char *envp[] = { NULL };
	struct subprocess_info *info;

	strscpy(st->exe, "/proc/self/fd/0", sizeof(st->exe));
	info = call_usermodehelper_setup(st->exe, argv, envp, GFP_KERNEL, st_umh_init, NULL, st);
	if (!info)
		return -ENOMEM;
	return call_usermodehelper_exec(info, UMH_WAIT_PROC);
}

static int st_run(struct gt_selftest *st, int *status)
{
	struct uprobe *handle;
	int ret;

	st->file = shmem_file_setup("gdbtrace-emu-selftest", PAGE_SIZE, GT_SHMEM_NO_FLAGS);
	if (IS_ERR(st->file))
		return PTR_ERR(st->file);
	ret = st_write_image(st->file);
	if (ret)
		goto out;
	ret = -EINVAL;
	if (gt_emu_decode(st_code + 2, sizeof(st_code) - 2, &st->emu) ||
	    st->emu.op != GDBTRACE_EMU_ADD_IMM)
		goto out;
	st->uc.handler = st_handler;
	ret = gt_uprobe_register(file_inode(st->file), ST_PROBE_OFF, &st->uc, &handle);
	if (ret)
		goto out;
	*status = st_run_helper(st);
	gt_uprobe_unregister(file_inode(st->file), ST_PROBE_OFF, &st->uc, handle);
	gt_uprobe_unregister_sync();
out:
	fput(st->file);
	return ret;
}

void gt_emu_selftest(void)
{
	struct gt_selftest *st = kzalloc(sizeof(*st), GFP_KERNEL);
	int ret, status = -EINVAL;

	if (!st)
		return;
	ret = st_run(st, &status);
	if (ret) {
		pr_warn("gdbtrace: emulation self-test could not run (%d): emulation off\n", ret);
	} else if (status == (1 << 8) && atomic_read(&st->emulated) == 1) {
		gt_emu_state = GT_EMU_OK;
	} else if (status == (2 << 8) && atomic_read(&st->emulated) == 1) {
		gt_emu_state = GT_EMU_DOUBLE;
		pr_info("gdbtrace: this kernel single-steps an instruction a handler already emulated: emulation off\n");
	} else {
		gt_emu_state = GT_EMU_FAILED;
		pr_warn("gdbtrace: emulation self-test: helper status %#x, %d emulations: emulation off\n",
			status, atomic_read(&st->emulated));
	}
	kfree(st);
}
