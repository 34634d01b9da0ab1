/*
 * Agent-expression opcodes (gdb 13 gdbsupport/ax.def): the one table of
 * opcode numbers, names, operand sizes and stack effects (abi/ax_opcodes.def,
 * one AX_OPCODE line per opcode). The verifier and the interpreter (ax/) and
 * the eBPF code generator (bpf/) read it; other code asks what the verifier
 * reported (AgentExpr in trace/tracepoint.h) and spells no opcode number.
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

/* AX_OP_ADD = 0x02, ... from the table in abi/ax_opcodes.def. */
enum ax_opcode {
#define AX_OPCODE(code, sym, name, operand, pops, pushes, flags) AX_OP_##sym = code,
#include "abi/ax_opcodes.def"
#undef AX_OPCODE
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
