/*
 * The agent-expression opcode table (gdb 13 gdbsupport/ax.def), for the
 * verifier and the interpreter. Internal to gdbtrace_ax; freestanding C.
 */
#ifndef GDBTRACE_AX_OPCODES_H
#define GDBTRACE_AX_OPCODES_H

#include "ax/ax.h"

enum ax_opcode {
  AX_OP_FLOAT = 0x01,
  AX_OP_ADD = 0x02,
  AX_OP_SUB = 0x03,
  AX_OP_MUL = 0x04,
  AX_OP_DIV_SIGNED = 0x05,
  AX_OP_DIV_UNSIGNED = 0x06,
  AX_OP_REM_SIGNED = 0x07,
  AX_OP_REM_UNSIGNED = 0x08,
  AX_OP_LSH = 0x09,
  AX_OP_RSH_SIGNED = 0x0a,
  AX_OP_RSH_UNSIGNED = 0x0b,
  AX_OP_TRACE = 0x0c,
  AX_OP_TRACE_QUICK = 0x0d,
  AX_OP_LOG_NOT = 0x0e,
  AX_OP_BIT_AND = 0x0f,
  AX_OP_BIT_OR = 0x10,
  AX_OP_BIT_XOR = 0x11,
  AX_OP_BIT_NOT = 0x12,
  AX_OP_EQUAL = 0x13,
  AX_OP_LESS_SIGNED = 0x14,
  AX_OP_LESS_UNSIGNED = 0x15,
  AX_OP_EXT = 0x16,
  AX_OP_REF8 = 0x17,
  AX_OP_REF16 = 0x18,
  AX_OP_REF32 = 0x19,
  AX_OP_REF64 = 0x1a,
  AX_OP_REF_FLOAT = 0x1b,
  AX_OP_REF_DOUBLE = 0x1c,
  AX_OP_REF_LONG_DOUBLE = 0x1d,
  AX_OP_L_TO_D = 0x1e,
  AX_OP_D_TO_L = 0x1f,
  AX_OP_IF_GOTO = 0x20,
  AX_OP_GOTO = 0x21,
  AX_OP_CONST8 = 0x22,
  AX_OP_CONST16 = 0x23,
  AX_OP_CONST32 = 0x24,
  AX_OP_CONST64 = 0x25,
  AX_OP_REG = 0x26,
  AX_OP_END = 0x27,
  AX_OP_DUP = 0x28,
  AX_OP_POP = 0x29,
  AX_OP_ZERO_EXT = 0x2a,
  AX_OP_SWAP = 0x2b,
  AX_OP_GETV = 0x2c,
  AX_OP_SETV = 0x2d,
  AX_OP_TRACEV = 0x2e,
  AX_OP_TRACENZ = 0x2f,
  AX_OP_TRACE16 = 0x30,
  AX_OP_INVALID2 = 0x31,
  AX_OP_PICK = 0x32,
  AX_OP_ROT = 0x33,
  AX_OP_PRINTF = 0x34,
  AX_OP_LAST = AX_OP_PRINTF
};

/* Properties of one opcode. */
enum ax_op_flags {
  AX_F_KNOWN = 1u << 0, /* a real opcode (0x00 and invalid2 are not) */
  AX_F_FLOAT = 1u << 1, /* floating point: rejected */
  AX_F_TRACE = 1u << 2, /* collects into the trace frame: not in conditions */
  AX_F_MEM = 1u << 3,   /* reads target memory */
  AX_F_TSV = 1u << 4,   /* operand is a trace state variable number */
  AX_F_JUMP = 1u << 5   /* operand is a 16-bit jump target */
};

struct ax_opinfo {
  const char* name;
  uint8_t operand_bytes; /* fixed operand bytes after the opcode (printf: 3, plus the string) */
  uint8_t pops;          /* values consumed (pick: see ax_verify; printf: 2 + nargs) */
  uint8_t pushes;        /* values produced */
  uint8_t flags;         /* enum ax_op_flags */
};

/* Table entry for OP; entries with flags == 0 are unknown opcodes. */
const struct ax_opinfo* ax_opinfo(uint8_t op);

#endif
