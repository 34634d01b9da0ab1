/*
 * Agent-expression opcodes (gdb 13 gdbsupport/ax.def): the one table of
 * opcode numbers, names, operand sizes and stack effects. The verifier and the
 * interpreter (ax/), the eBPF code generator (bpf/) and the stub's kernel-module
 * collector (kmod/) all read it; nothing else spells an opcode number.
 *
 * Freestanding C (no libc): included by the kernel module like ax/ax.h.
 *
 * Two deliberate differences from ax.def's stack columns, following
 * gdbserver's interpreter (gdbserver/ax.cc) and the manual rather than ax.def:
 *  - tracev leaves the stack alone (ax.def says it produces one value, but
 *    gdb emits `getv n; tracev n` and expects one value, not two);
 *  - printf pops 2 + nargs (function, channel, then the arguments) and its
 *    operands are nargs (1 byte), string length (2 bytes) and the string.
 * `pick n` pops n + 1 and pushes n + 2 (it copies the value n below the top);
 * ax_stack_effect() applies both operand-dependent rules.
 */
#ifndef GDBTRACE_ABI_AX_OPCODES_H
#define GDBTRACE_ABI_AX_OPCODES_H

#ifdef __KERNEL__
#include <linux/types.h>
#else
#include <stdint.h>
#endif

/* Properties of one opcode. */
enum ax_op_flags {
  AX_F_KNOWN = 1u << 0, /* a real opcode (0x00 and invalid2 are not) */
  AX_F_FLOAT = 1u << 1, /* floating point: rejected */
  AX_F_TRACE = 1u << 2, /* collects into the trace frame: not in conditions */
  AX_F_MEM = 1u << 3,   /* reads target memory */
  AX_F_TSV = 1u << 4,   /* operand is a trace state variable number */
  AX_F_JUMP = 1u << 5   /* operand is a 16-bit jump target */
};

/* X(code, symbol, name, operand bytes, pops, pushes, flags); AX_F_KNOWN implied. */
#define AX_OPCODE_TABLE(X)                                                                         \
  X(0x01, FLOAT, "float", 0, 0, 0, AX_F_FLOAT)                                                     \
  X(0x02, ADD, "add", 0, 2, 1, 0)                                                                  \
  X(0x03, SUB, "sub", 0, 2, 1, 0)                                                                  \
  X(0x04, MUL, "mul", 0, 2, 1, 0)                                                                  \
  X(0x05, DIV_SIGNED, "div_signed", 0, 2, 1, 0)                                                    \
  X(0x06, DIV_UNSIGNED, "div_unsigned", 0, 2, 1, 0)                                                \
  X(0x07, REM_SIGNED, "rem_signed", 0, 2, 1, 0)                                                    \
  X(0x08, REM_UNSIGNED, "rem_unsigned", 0, 2, 1, 0)                                                \
  X(0x09, LSH, "lsh", 0, 2, 1, 0)                                                                  \
  X(0x0a, RSH_SIGNED, "rsh_signed", 0, 2, 1, 0)                                                    \
  X(0x0b, RSH_UNSIGNED, "rsh_unsigned", 0, 2, 1, 0)                                                \
  X(0x0c, TRACE, "trace", 0, 2, 0, AX_F_TRACE | AX_F_MEM)                                          \
  X(0x0d, TRACE_QUICK, "trace_quick", 1, 1, 1, AX_F_TRACE | AX_F_MEM)                              \
  X(0x0e, LOG_NOT, "log_not", 0, 1, 1, 0)                                                          \
  X(0x0f, BIT_AND, "bit_and", 0, 2, 1, 0)                                                          \
  X(0x10, BIT_OR, "bit_or", 0, 2, 1, 0)                                                            \
  X(0x11, BIT_XOR, "bit_xor", 0, 2, 1, 0)                                                          \
  X(0x12, BIT_NOT, "bit_not", 0, 1, 1, 0)                                                          \
  X(0x13, EQUAL, "equal", 0, 2, 1, 0)                                                              \
  X(0x14, LESS_SIGNED, "less_signed", 0, 2, 1, 0)                                                  \
  X(0x15, LESS_UNSIGNED, "less_unsigned", 0, 2, 1, 0)                                              \
  X(0x16, EXT, "ext", 1, 1, 1, 0)                                                                  \
  X(0x17, REF8, "ref8", 0, 1, 1, AX_F_MEM)                                                         \
  X(0x18, REF16, "ref16", 0, 1, 1, AX_F_MEM)                                                       \
  X(0x19, REF32, "ref32", 0, 1, 1, AX_F_MEM)                                                       \
  X(0x1a, REF64, "ref64", 0, 1, 1, AX_F_MEM)                                                       \
  X(0x1b, REF_FLOAT, "ref_float", 0, 1, 1, AX_F_FLOAT)                                             \
  X(0x1c, REF_DOUBLE, "ref_double", 0, 1, 1, AX_F_FLOAT)                                           \
  X(0x1d, REF_LONG_DOUBLE, "ref_long_double", 0, 1, 1, AX_F_FLOAT)                                 \
  X(0x1e, L_TO_D, "l_to_d", 0, 1, 1, AX_F_FLOAT)                                                   \
  X(0x1f, D_TO_L, "d_to_l", 0, 1, 1, AX_F_FLOAT)                                                   \
  X(0x20, IF_GOTO, "if_goto", 2, 1, 0, AX_F_JUMP)                                                  \
  X(0x21, GOTO, "goto", 2, 0, 0, AX_F_JUMP)                                                        \
  X(0x22, CONST8, "const8", 1, 0, 1, 0)                                                            \
  X(0x23, CONST16, "const16", 2, 0, 1, 0)                                                          \
  X(0x24, CONST32, "const32", 4, 0, 1, 0)                                                          \
  X(0x25, CONST64, "const64", 8, 0, 1, 0)                                                          \
  X(0x26, REG, "reg", 2, 0, 1, 0)                                                                  \
  X(0x27, END, "end", 0, 0, 0, 0)                                                                  \
  X(0x28, DUP, "dup", 0, 1, 2, 0)                                                                  \
  X(0x29, POP, "pop", 0, 1, 0, 0)                                                                  \
  X(0x2a, ZERO_EXT, "zero_ext", 1, 1, 1, 0)                                                        \
  X(0x2b, SWAP, "swap", 0, 2, 2, 0)                                                                \
  X(0x2c, GETV, "getv", 2, 0, 1, AX_F_TSV)                                                         \
  X(0x2d, SETV, "setv", 2, 1, 1, AX_F_TSV)                                                         \
  X(0x2e, TRACEV, "tracev", 2, 0, 0, AX_F_TSV | AX_F_TRACE)                                        \
  X(0x2f, TRACENZ, "tracenz", 0, 2, 0, AX_F_TRACE | AX_F_MEM)                                      \
  X(0x30, TRACE16, "trace16", 2, 1, 1, AX_F_TRACE | AX_F_MEM)                                      \
  X(0x32, PICK, "pick", 1, 0, 1, 0)                                                                \
  X(0x33, ROT, "rot", 0, 3, 3, 0)                                                                  \
  X(0x34, PRINTF, "printf", 3, 2, 0, 0)

enum ax_opcode {
#define AX_OPCODE_ENUM(code, sym, name, operand, pops, pushes, flags) AX_OP_##sym = code,
  AX_OPCODE_TABLE(AX_OPCODE_ENUM)
#undef AX_OPCODE_ENUM
      AX_OP_INVALID2 = 0x31, /* in ax.def, but no opcode */
  AX_OP_LAST = AX_OP_PRINTF
};

struct ax_opinfo {
  const char* name;
  uint8_t operand_bytes; /* fixed operand bytes after the opcode (printf: 3, plus the string) */
  uint8_t pops;          /* values consumed (pick, printf: see ax_stack_effect) */
  uint8_t pushes;        /* values produced */
  uint8_t flags;         /* enum ax_op_flags */
};

#ifdef __cplusplus
extern "C" {
#endif

/* Table entry for OP; entries with flags == 0 are unknown opcodes. Defined in ax/ax_opcodes.c. */
const struct ax_opinfo* ax_opinfo(uint8_t op);

#ifdef __cplusplus
}
#endif

/* Values the instruction at INSN (opcode and its operands) needs on the stack
 * and leaves there. */
static inline void ax_stack_effect(const uint8_t* insn, uint32_t* pops, uint32_t* pushes) {
  const struct ax_opinfo* info = ax_opinfo(insn[0]);
  *pops = info->pops;
  *pushes = info->pushes;
  if (insn[0] == AX_OP_PICK) {
    *pops = insn[1] + 1u;
    *pushes = insn[1] + 2u;
  } else if (insn[0] == AX_OP_PRINTF) {
    *pops = 2u + insn[1];
  }
}

/* Big-endian operand of WIDTH bytes (1, 2, 4 or 8) at P, as bytecode stores them. */
static inline uint64_t ax_operand(const uint8_t* p, uint32_t width) {
  uint64_t v = 0;
  uint32_t i;
  for (i = 0; i < width; i++)
    v = (v << 8) | p[i];
  return v;
}

#endif
