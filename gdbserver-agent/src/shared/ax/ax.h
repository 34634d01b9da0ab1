/*
 * gdb agent-expression VM: verifier + interpreter.
 *
 * One source, freestanding C11 (no libc, no allocation, no recursion), compiled
 * unchanged into gdbtrace-server, the gdbtrace.ko kernel module, the eBPF code
 * generator's differential tests and the libFuzzer target. Bytecode arrives
 * from the network (QTDP, Z0 conditions), so it is never trusted: ax_verify()
 * must accept a program before ax_eval() may run it, and ax_eval() still keeps
 * every access in bounds and every loop within a step budget.
 *
 * Opcodes and semantics: GDB manual, "Agent Expressions" / gdb/common/ax.def.
 */
#ifndef GDBTRACE_AX_H
#define GDBTRACE_AX_H

#ifdef __KERNEL__
#include <linux/nospec.h>
#include <linux/types.h>
#else
#include <stddef.h>
#include <stdint.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* An index into an array of N that bytecode chose, bounds-checked just
 * before: in the kernel the check must also hold under speculation (Spectre
 * v1), so the index is clamped with array_index_nospec; user space has no
 * such boundary to protect. */
#ifdef __KERNEL__
#define AX_INDEX_NOSPEC(i, n) array_index_nospec((i), (n))
#else
#define AX_INDEX_NOSPEC(i, n) (i)
#endif

/* Hard limits: a program over these is rejected by the verifier. */
#define AX_MAX_CODE_LEN 4096u          /* bytes of bytecode */
#define AX_MAX_STACK 128u              /* value-stack slots (also the verifier's depth bound) */
#define AX_DEFAULT_STEP_BUDGET 100000u /* opcodes executed per evaluation */

/* Error codes (negative) returned by ax_verify / ax_eval and callbacks. */
enum ax_status {
  AX_OK = 0,
  AX_ERR_UNKNOWN_OP = -1,     /* opcode not in ax.def */
  AX_ERR_FLOAT_OP = -2,       /* floating-point opcodes are not supported */
  AX_ERR_TRUNCATED = -3,      /* operand bytes missing */
  AX_ERR_BAD_JUMP = -4,       /* jump target outside the program / mid-instruction */
  AX_ERR_STACK_OVERFLOW = -5, /* depth bound exceeds AX_MAX_STACK (verify) or at run time */
  AX_ERR_STACK_UNDERFLOW = -6,
  AX_ERR_BAD_REG = -7, /* reg operand not a known register */
  AX_ERR_BAD_TSV = -8, /* getv/setv/tracev index not defined */
  AX_ERR_NO_END = -9,  /* control can fall off the end without `end` */
  AX_ERR_TOO_LONG = -10,
  AX_ERR_STEP_BUDGET = -11, /* run time: step budget exhausted (runaway loop) */
  AX_ERR_DIV_ZERO = -12,
  AX_ERR_MEM = -13, /* run time: memory unreadable (callback failed) */
  AX_ERR_REG_UNAVAILABLE = -14,
  AX_ERR_TRACE = -15,       /* run time: collection callback failed (e.g. frame full) */
  AX_ERR_BAD_PRINTF = -16,  /* printf format/arg count malformed */
  AX_ERR_NOT_ALLOWED = -17, /* opcode not allowed in this context (e.g. trace ops in a condition) */
  AX_ERR_INCONSISTENT_STACK = -18, /* two paths reach one instruction with different depths */
  AX_ERR_BAD_OPERAND = -19,        /* ext/zero_ext width not in 1..64 */
  AX_ERR_NO_SCRATCH = -20,         /* kernel build: ax_verify_ctx.scratch must be provided */
  AX_ERR_BAD_ARG = -21             /* NULL code/ctx/env, or ax_verified.code_len 0 or too long */
};

/* Verifier work area (about 13 KB). User space may leave ax_verify_ctx.scratch
 * NULL and the verifier uses its own stack; kernel code must allocate one
 * (kmalloc) because kernel stacks are small. After ax_verify() accepted a
 * program, the caller's scratch keeps what the verifier proved about each
 * instruction: read it with ax_depth_before(). */
struct ax_verify_scratch {
  uint8_t depth[AX_MAX_CODE_LEN];           /* 1 + stack depth at each reached pc, 0: unreached */
  uint8_t insn_start[AX_MAX_CODE_LEN / 8u]; /* bitmap: an instruction starts at this pc */
  uint16_t worklist[AX_MAX_CODE_LEN];       /* pcs whose successors still need a visit */
};

/* Values on the stack when the instruction at PC starts, on every path that
 * reaches it (the verifier proved there is one such number); -1 when no path
 * reaches PC or no instruction starts there. Valid after ax_verify() returned
 * AX_OK with this scratch, for PC below the program's length. */
static inline int ax_depth_before(const struct ax_verify_scratch* ws, uint32_t pc) {
  return ws->depth[pc] ? (int)ws->depth[pc] - 1 : -1;
}

/* How a program uses a trace state variable (ax_verify_ctx.note_tsv). */
enum ax_tsv_access {
  AX_TSV_READ = 1u, /* getv, tracev */
  AX_TSV_WRITE = 2u /* setv */
};

/* What the verifier needs to know about the context the program will run in. */
struct ax_verify_ctx {
  uint32_t num_regs; /* registers accepted by `reg` (GT_NUM_REGS_*) */
  /* Returns nonzero when trace state variable NUM exists. NULL: any number ok. */
  int (*tsv_exists)(void* opaque, uint32_t num);
  /* Called for every getv/setv/tracev operand (ACCESS: enum ax_tsv_access), so
   * callers learn which TSVs a program reads and writes without decoding it
   * themselves. May be NULL. Calls before an error are not taken back. */
  void (*note_tsv)(void* opaque, uint32_t num, uint32_t access);
  void* opaque;
  int allow_trace_ops; /* 0 for conditions: trace/tracev/trace_quick/tracenz rejected */
  struct ax_verify_scratch* scratch; /* NULL: on the stack (not allowed under __KERNEL__) */
};

/* What the verifier learned; ax_eval() requires it. */
struct ax_verified {
  uint32_t code_len;
  uint32_t max_stack;         /* computed stack-depth bound */
  uint32_t has_backward_jump; /* program may loop: evaluation needs the step budget */
  uint32_t uses_mem;          /* ref*, trace*, printf with %s */
  uint32_t uses_tsv;          /* getv/setv/tracev */
  uint32_t uses_printf;
  uint32_t uses_trace; /* trace/trace_quick/tracenz/trace16/tracev */
  uint32_t uses_regs;  /* reg */
  uint32_t num_insns;  /* instructions in the program */
};

/* Verify CODE[0..LEN). On error, returns a negative ax_status and, when ERR_PC
 * is non-NULL, the byte offset of the offending instruction. */
int ax_verify(const uint8_t* code, uint32_t len, const struct ax_verify_ctx* ctx,
              struct ax_verified* out, uint32_t* err_pc);

/* Short English text for an ax_status (static storage). */
const char* ax_strerror(int status);

/* Name of opcode OP as in gdb's ax.def ("add", "const8", ...), NULL if unknown. */
const char* ax_op_name(uint8_t op);

/* Run-time services. Every callback returns 0 on success or a negative
 * ax_status; an error aborts evaluation and is returned by ax_eval(). */
struct ax_env {
  void* opaque;
  int (*read_reg)(void* opaque, uint32_t regno, uint64_t* value);
  /* Read LEN bytes (1..8 for ref*, any for printf %s) at ADDR into BUF. */
  int (*read_mem)(void* opaque, uint64_t addr, void* buf, uint32_t len);
  int (*get_tsv)(void* opaque, uint32_t num, int64_t* value);
  int (*set_tsv)(void* opaque, uint32_t num, int64_t value);
  /* Collect LEN bytes at ADDR into the frame (trace, trace_quick). When NZ is
   * set (tracenz), stop at the first zero byte, which is collected too. */
  int (*trace_mem)(void* opaque, uint64_t addr, uint32_t len, int nz);
  /* Collect the value of trace state variable NUM into the frame (tracev). */
  int (*trace_tsv)(void* opaque, uint32_t num);
  /* Agent printf: FMT (NUL-terminated, FMT_LEN bytes incl. NUL, escapes not yet
   * processed: render with ax_format) with NARGS arguments, ARGS[0] for the
   * first conversion (for %s, the argument is an address to read). The
   * function/channel operands gdb pushes are popped and ignored. NULL: printf
   * fails with AX_ERR_NOT_ALLOWED. */
  int (*printf)(void* opaque, const char* fmt, uint32_t fmt_len, uint32_t nargs,
                const uint64_t* args);
  uint32_t step_budget; /* 0: AX_DEFAULT_STEP_BUDGET */
  /* Out, may be NULL: the steps the evaluation took (also on error), so a
   * caller can spend one budget across several programs. */
  uint32_t* steps_used;
};

/* Evaluate a verified program. On success returns AX_OK and stores the value
 * on top of the stack at `end` (0 if the stack is empty) into *RESULT (may be
 * NULL). Semantics are gdbserver's (gdbserver/ax.cc) with its undefined cases
 * pinned down: shifts by >= 64 give 0 (rsh_signed: the sign fill),
 * INT64_MIN / -1 wraps, ref* zero-extend little-endian loads, tracenz sizes
 * are clamped to 0xffffffff. */
int ax_eval(const uint8_t* code, const struct ax_verified* verified, const struct ax_env* env,
            uint64_t* result);

/* Memory reader used by ax_format for %s (same contract as ax_env.read_mem). */
typedef int (*ax_read_mem_fn)(void* opaque, uint64_t addr, void* buf, uint32_t len);

/* Check an agent printf format (FMT_LEN bytes including the final NUL, no
 * other NUL) the way gdbserver's format_pieces does: gdb sends the text
 * between the quotes raw, so backslash escapes (\n \t \" ...) are processed
 * here. Supported conversions: d i u o x X c s p and %%, flags "-+ #0", width,
 * precision, length h l ll z. Stores the number of arguments wanted in *NARGS
 * and whether a %s is present in *USES_STR (either may be NULL).
 * Returns AX_OK or AX_ERR_BAD_PRINTF. */
int ax_printf_check(const char* fmt, uint32_t fmt_len, uint32_t* nargs, int* uses_str);

/* Render an agent printf into OUT[0..OUTLEN) (always NUL-terminated when
 * OUTLEN > 0; output beyond OUTLEN-1 characters is dropped). ARGS[i] is the
 * i-th conversion's argument, as ax_env.printf receives them; %s arguments
 * are addresses read through READ_MEM (at most AX_FORMAT_MAX_STR bytes; 0
 * prints "(null)"). Returns the number of characters stored (without the
 * NUL), or a negative ax_status (AX_ERR_BAD_PRINTF, AX_ERR_MEM). */
#define AX_FORMAT_MAX_STR 4096u
int ax_format(char* out, uint32_t outlen, const char* fmt, uint32_t fmt_len, uint32_t nargs,
              const uint64_t* args, ax_read_mem_fn read_mem, void* opaque);

#ifdef __cplusplus
}
#endif

#endif
