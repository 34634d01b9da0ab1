/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * /dev/gdbtrace user API: shared by gdbtrace.ko and the stub (gdbserver-agent/src/kmod).
 *
 * One open file is one session. The first ioctl must be GDBTRACE_IOC_INIT, which
 * fixes the API version, the 'R' block size and the ring size; the stub then
 * mmap()s the rings (GDBTRACE_MMAP_SIZE from the INIT reply), adds probes, and
 * starts collection. Closing the file removes every probe of the session.
 *
 * Ring layout (mmap, one ring per possible CPU, ring i at i * ring_stride):
 *   struct gdbtrace_ring_header   (one page; kernel writes head/drops, stub writes tail)
 *   data[data_size]               (records, each 16-byte aligned)
 * A record is struct gdbtrace_record followed by `len` bytes: one complete trace
 * frame in gdb's tfile layout (u16 tp, u32 size, blocks 'R' / 'M' / 'V'). A record
 * with GDBTRACE_REC_PAD means "skip to the start of the data area". Positions
 * head and tail are free-running byte counters (offset = pos % data_size).
 * A frame that does not fit is dropped whole and counted in `drops`. Rings are
 * per CPU: a thread that migrates spreads its frames over several rings, so the
 * reader merges them by `seq` (taken just before the record is published).
 */
#ifndef GDBTRACE_UAPI_H
#define GDBTRACE_UAPI_H

#include <linux/ioctl.h>
#include <linux/types.h>

/* 2: ioctl magic moved off nsfs's 0xB7; the module decodes the probed
 * instruction itself (GDBTRACE_PROBE_EMULATE) and reports the recipe. */
#define GDBTRACE_UAPI_VERSION 2
#define GDBTRACE_DEVICE "/dev/gdbtrace"

/* Bounds the module enforces. */
#define GDBTRACE_MAX_PROBES 65536     /* per session (each charged to the caller's memcg) */
#define GDBTRACE_MAX_PROBES_TOTAL 131072 /* all sessions together */
#define GDBTRACE_ADD_RATE 2000        /* ADDs per second per user, sustained: a faster caller sleeps */
#define GDBTRACE_ADD_BURST 10000      /* ADDs per user at once, before the rate applies */
#define GDBTRACE_MAX_ACTIONS 64       /* per probe */
#define GDBTRACE_MAX_CODE 4096        /* bytes of one bytecode program (= AX_MAX_CODE_LEN) */
#define GDBTRACE_MAX_MEM 65535        /* bytes of one 'M' action (u16 block length) */
#define GDBTRACE_MAX_FRAME (256 * 1024) /* bytes of one frame */
#define GDBTRACE_MAX_TSVS 1024        /* TSV numbers 0..GDBTRACE_MAX_TSVS-1 */
#define GDBTRACE_MIN_RING_SHIFT 16    /* 64 KiB per CPU */
#define GDBTRACE_MAX_RING_SHIFT 26    /* 64 MiB per CPU */
#define GDBTRACE_MAX_EMU 16           /* bytes of an emulation recipe's instruction */

struct gdbtrace_init {
  __u32 version;        /* in: GDBTRACE_UAPI_VERSION */
  __u32 regblock_size;  /* in: 560 or 816 */
  __u32 ring_shift;     /* in: data bytes per ring = 1 << ring_shift */
  __u32 nr_rings;       /* out: number of rings (possible CPUs) */
  __u64 ring_stride;    /* out: bytes between rings in the mapping */
  __u64 mmap_size;      /* out: total bytes to mmap at offset 0 */
  __u32 features;       /* out: GDBTRACE_FEAT_* */
  __u32 reg_valid;      /* out: bitmask over regnums 0..31 the 'R' block fills */
  __u32 reg_valid_hi;   /* out: bitmask over regnums 32..63 */
  __u32 reserved;
};
#define GDBTRACE_FEAT_EMULATE 1u /* module emulates common probed instructions */
#define GDBTRACE_FEAT_FPU 2u     /* 'R' actions take GDBTRACE_ACT_REGS_FPU */
/* Why GDBTRACE_FEAT_EMULATE is missing (ADD then refuses GDBTRACE_PROBE_EMULATE
 * with EOPNOTSUPP). The module tests the kernel at load: it runs an emulated
 * instruction in a helper process and sees whether it ran once.
 * EMU_DOUBLE: it ran twice: this kernel single-steps the original instruction
 * even after a handler moved ip (upstream 4363264111e1 missing: 6.18 and the
 * stable series it was backported to have it). EMU_UNTESTED: the test could
 * not run (the kernel log says why). */
#define GDBTRACE_FEAT_EMU_DOUBLE 4u
#define GDBTRACE_FEAT_EMU_UNTESTED 8u

struct gdbtrace_ring_header {
  __u64 head;      /* kernel: bytes produced */
  __u64 tail;      /* stub: bytes consumed */
  __u64 drops;     /* kernel: frames dropped (ring full) */
  __u64 data_size; /* bytes of the data area */
  __u64 data_offset; /* offset of the data area from the header */
};

#define GDBTRACE_REC_ALIGN 16 /* a record takes ALIGN(sizeof(record) + len, 16) bytes */
#define GDBTRACE_REC_PAD 1u
struct gdbtrace_record {
  __u32 len;   /* bytes of frame that follow (0 for a pad record) */
  __u32 flags; /* GDBTRACE_REC_* */
  __u64 seq;   /* session-wide order of the frame: merge the rings by it */
};

enum gdbtrace_action_kind {
  GDBTRACE_ACT_REGS = 'R', /* the 'R' block */
  GDBTRACE_ACT_MEM = 'M',  /* basereg (-1 absolute) + offset, len bytes */
  GDBTRACE_ACT_EXPR = 'X', /* bytecode: trace/trace_quick/tracenz/tracev collect */
};

struct gdbtrace_action {
  __u32 kind;      /* enum gdbtrace_action_kind */
  __s32 basereg;   /* 'M': register number or -1 */
  __s64 offset;    /* 'M' */
  __u32 len;       /* 'M': bytes; 'X': bytecode length */
  __u32 flags;     /* 'R': GDBTRACE_ACT_REGS_*; 0 for the other kinds */
  __u64 code;      /* 'X': user pointer to bytecode */
};
/* 'R' also fills the x87/SSE registers (and AVX's upper halves with an 816-byte
 * block) from the task's FPU state, at the cost of saving it at the hit.
 * Needs GDBTRACE_FEAT_FPU; without it the block leaves them zero and
 * reg_valid/reg_valid_hi do not name them. */
#define GDBTRACE_ACT_REGS_FPU 1u

/* Emulation recipe: what the module's decoder made of the probed instruction
 * (the file's bytes at the probe offset). Reported by ADD, never taken from the
 * caller. The module emulates only in a 64-bit process, at the first probe of a
 * session at a site, and never while the thread single-steps (TF) or has
 * hardware breakpoints armed: then the kernel executes the instruction itself. */
enum gdbtrace_emu_op {
  GDBTRACE_EMU_NONE = 0,         /* no recipe: the kernel's own path (single-step) */
  GDBTRACE_EMU_ENDBR = 1,        /* endbr64: nothing but ip += len */
  GDBTRACE_EMU_MOV_REG_REG = 2,  /* dst = src */
  GDBTRACE_EMU_ADD_IMM = 3,      /* dst += imm, arithmetic flags set */
  GDBTRACE_EMU_SUB_IMM = 4,      /* dst -= imm, arithmetic flags set */
  GDBTRACE_EMU_MOV_IMM = 5,      /* dst = imm */
  GDBTRACE_EMU_LEA_RIP = 6,      /* dst = next_ip + imm */
  GDBTRACE_EMU_LOAD_RIP = 7,     /* dst = *(next_ip + imm) */
  GDBTRACE_EMU_STORE_RIP = 8,    /* *(next_ip + imm) = src */
  GDBTRACE_EMU_LOAD = 9,         /* dst = *(src + imm) */
  GDBTRACE_EMU_STORE = 10,       /* *(dst + imm) = src */
  GDBTRACE_EMU_OP_MAX = 10,
};
/* Registers are gdb numbers 0..15 (rax rbx rcx rdx rsi rdi rbp rsp r8..r15).
 * width 4: 32-bit operation, a register result is zero-extended (x86-64 rules);
 * width 8: 64-bit. next_ip = probe address + insn_len. */

struct gdbtrace_emu {
  __u32 op;         /* enum gdbtrace_emu_op (0: no emulation, single-step) */
  __u8 insn_len;    /* bytes of the instruction */
  __u8 dst;         /* register number (gdb numbering, 0..15) */
  __u8 src;         /* register number (0..15) */
  __u8 width;       /* operand bytes: 4 or 8 */
  __s64 imm;
  __u8 insn[GDBTRACE_MAX_EMU]; /* the instruction's bytes as decoded */
};

/* ADD errors: EPERM unless the caller's process ptraces a thread of PID and
 * may access it as ptrace(PTRACE_MODE_ATTACH_REALCREDS) would now (a
 * non-dumpable process needs CAP_SYS_PTRACE over its user namespace);
 * ESTALE unless FD at OFFSET is what PID maps executable at ADDRESS;
 * EOPNOTSUPP for GDBTRACE_PROBE_EMULATE without GDBTRACE_FEAT_EMULATE;
 * ENOSPC past GDBTRACE_MAX_PROBES in the session or the module's total;
 * E2BIG for a program naming more than 8 trace state variables.
 * ADD is throttled per user (the caller sleeps past the burst and rate). */
struct gdbtrace_probe_add {
  __s32 pid;          /* in: target process (tgid) */
  __s32 fd;           /* in: open file descriptor of the mapped file */
  __u64 offset;       /* in: file offset of the instruction */
  __u64 address;      /* in: its virtual address in the target (hits elsewhere are refused) */
  __u32 tp_number;    /* in: gdb tracepoint number (u16 in frames) */
  __u32 nr_actions;   /* in */
  __u64 actions;      /* in: user pointer to struct gdbtrace_action[nr_actions] */
  __u64 cond;         /* in: user pointer to condition bytecode (0: none) */
  __u32 cond_len;     /* in */
  __u32 flags;        /* in: GDBTRACE_PROBE_* */
  __u64 pass_count;   /* in: stop the session after this many hits (0: none) */
  struct gdbtrace_emu emu; /* in: zero; out: the recipe the module will emulate (op 0: none) */
  __u32 id;           /* out: probe id for other ioctls */
  __u32 reserved;
};
#define GDBTRACE_PROBE_DISABLED 1u /* add disabled */
#define GDBTRACE_PROBE_EMULATE 2u  /* emulate the instruction where the module can (see emu) */

struct gdbtrace_probe_enable {
  __u32 id;
  __u32 enable;
};

struct gdbtrace_probe_status {
  __u32 id;        /* in */
  __u32 flags;     /* out: GDBTRACE_PST_* */
  __u64 hits, frames, bytes, drops, errors, emulated;
};
#define GDBTRACE_PST_ENABLED 1u
#define GDBTRACE_PST_EMULATING 2u

enum gdbtrace_stop_reason {
  GDBTRACE_STOP_NONE = 0,
  GDBTRACE_STOP_REQUESTED = 1,
  GDBTRACE_STOP_PASSCOUNT = 2,
};

struct gdbtrace_session_status {
  __u32 running;
  __u32 stop_reason; /* enum gdbtrace_stop_reason */
  __u32 stop_tp;     /* tracepoint whose pass count stopped the run */
  __u32 nr_probes;
  __u64 drops;       /* all rings */
};

struct gdbtrace_tsv {
  __u32 num;
  __u32 flags;      /* set: GDBTRACE_TSV_DEFINE creates it; get: out GDBTRACE_TSV_DEFINED */
  __s64 value;
};
#define GDBTRACE_TSV_DEFINE 1u
#define GDBTRACE_TSV_DEFINED 2u

#define GDBTRACE_IOC_MAGIC 0xE9 /* free in Documentation/userspace-api/ioctl/ioctl-number.rst */
#define GDBTRACE_IOC_INIT _IOWR(GDBTRACE_IOC_MAGIC, 1, struct gdbtrace_init)
#define GDBTRACE_IOC_ADD _IOWR(GDBTRACE_IOC_MAGIC, 2, struct gdbtrace_probe_add)
#define GDBTRACE_IOC_ENABLE _IOW(GDBTRACE_IOC_MAGIC, 3, struct gdbtrace_probe_enable)
#define GDBTRACE_IOC_START _IO(GDBTRACE_IOC_MAGIC, 4)
#define GDBTRACE_IOC_STOP _IO(GDBTRACE_IOC_MAGIC, 5)
#define GDBTRACE_IOC_PROBE_STATUS _IOWR(GDBTRACE_IOC_MAGIC, 6, struct gdbtrace_probe_status)
#define GDBTRACE_IOC_STATUS _IOR(GDBTRACE_IOC_MAGIC, 7, struct gdbtrace_session_status)
#define GDBTRACE_IOC_TSV_SET _IOW(GDBTRACE_IOC_MAGIC, 8, struct gdbtrace_tsv)
#define GDBTRACE_IOC_TSV_GET _IOWR(GDBTRACE_IOC_MAGIC, 9, struct gdbtrace_tsv)
#define GDBTRACE_IOC_REMOVE_ALL _IO(GDBTRACE_IOC_MAGIC, 10)

#endif
