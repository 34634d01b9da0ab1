/*
 * Opcode table, transcribed from gdb 13 gdbsupport/ax.def. Two deliberate
 * differences from ax.def's stack columns, following gdbserver's interpreter
 * (gdbserver/ax.cc) and the manual rather than ax.def:
 *  - tracev leaves the stack alone (ax.def says it produces one value, but
 *    gdb emits `getv n; tracev n` and expects one value, not two);
 *  - printf pops 2 + nargs (function, channel, then the arguments) and its
 *    operands are nargs (1 byte), string length (2 bytes) and the string.
 */
#include "ax/ax_opcodes.h"

#define OP(code, nm, operand, pop, push, fl)                                                       \
  [code] = {.name = nm,                                                                            \
            .operand_bytes = operand,                                                              \
            .pops = pop,                                                                           \
            .pushes = push,                                                                        \
            .flags = AX_F_KNOWN | (fl)}

static const struct ax_opinfo table[AX_OP_LAST + 1] = {
    OP(AX_OP_FLOAT, "float", 0, 0, 0, AX_F_FLOAT),
    OP(AX_OP_ADD, "add", 0, 2, 1, 0),
    OP(AX_OP_SUB, "sub", 0, 2, 1, 0),
    OP(AX_OP_MUL, "mul", 0, 2, 1, 0),
    OP(AX_OP_DIV_SIGNED, "div_signed", 0, 2, 1, 0),
    OP(AX_OP_DIV_UNSIGNED, "div_unsigned", 0, 2, 1, 0),
    OP(AX_OP_REM_SIGNED, "rem_signed", 0, 2, 1, 0),
    OP(AX_OP_REM_UNSIGNED, "rem_unsigned", 0, 2, 1, 0),
    OP(AX_OP_LSH, "lsh", 0, 2, 1, 0),
    OP(AX_OP_RSH_SIGNED, "rsh_signed", 0, 2, 1, 0),
    OP(AX_OP_RSH_UNSIGNED, "rsh_unsigned", 0, 2, 1, 0),
    OP(AX_OP_TRACE, "trace", 0, 2, 0, AX_F_TRACE | AX_F_MEM),
    OP(AX_OP_TRACE_QUICK, "trace_quick", 1, 1, 1, AX_F_TRACE | AX_F_MEM),
    OP(AX_OP_LOG_NOT, "log_not", 0, 1, 1, 0),
    OP(AX_OP_BIT_AND, "bit_and", 0, 2, 1, 0),
    OP(AX_OP_BIT_OR, "bit_or", 0, 2, 1, 0),
    OP(AX_OP_BIT_XOR, "bit_xor", 0, 2, 1, 0),
    OP(AX_OP_BIT_NOT, "bit_not", 0, 1, 1, 0),
    OP(AX_OP_EQUAL, "equal", 0, 2, 1, 0),
    OP(AX_OP_LESS_SIGNED, "less_signed", 0, 2, 1, 0),
    OP(AX_OP_LESS_UNSIGNED, "less_unsigned", 0, 2, 1, 0),
    OP(AX_OP_EXT, "ext", 1, 1, 1, 0),
    OP(AX_OP_REF8, "ref8", 0, 1, 1, AX_F_MEM),
    OP(AX_OP_REF16, "ref16", 0, 1, 1, AX_F_MEM),
    OP(AX_OP_REF32, "ref32", 0, 1, 1, AX_F_MEM),
    OP(AX_OP_REF64, "ref64", 0, 1, 1, AX_F_MEM),
    OP(AX_OP_REF_FLOAT, "ref_float", 0, 1, 1, AX_F_FLOAT),
    OP(AX_OP_REF_DOUBLE, "ref_double", 0, 1, 1, AX_F_FLOAT),
    OP(AX_OP_REF_LONG_DOUBLE, "ref_long_double", 0, 1, 1, AX_F_FLOAT),
    OP(AX_OP_L_TO_D, "l_to_d", 0, 1, 1, AX_F_FLOAT),
    OP(AX_OP_D_TO_L, "d_to_l", 0, 1, 1, AX_F_FLOAT),
    OP(AX_OP_IF_GOTO, "if_goto", 2, 1, 0, AX_F_JUMP),
    OP(AX_OP_GOTO, "goto", 2, 0, 0, AX_F_JUMP),
    OP(AX_OP_CONST8, "const8", 1, 0, 1, 0),
    OP(AX_OP_CONST16, "const16", 2, 0, 1, 0),
    OP(AX_OP_CONST32, "const32", 4, 0, 1, 0),
    OP(AX_OP_CONST64, "const64", 8, 0, 1, 0),
    OP(AX_OP_REG, "reg", 2, 0, 1, 0),
    OP(AX_OP_END, "end", 0, 0, 0, 0),
    OP(AX_OP_DUP, "dup", 0, 1, 2, 0),
    OP(AX_OP_POP, "pop", 0, 1, 0, 0),
    OP(AX_OP_ZERO_EXT, "zero_ext", 1, 1, 1, 0),
    OP(AX_OP_SWAP, "swap", 0, 2, 2, 0),
    OP(AX_OP_GETV, "getv", 2, 0, 1, AX_F_TSV),
    OP(AX_OP_SETV, "setv", 2, 1, 1, AX_F_TSV),
    OP(AX_OP_TRACEV, "tracev", 2, 0, 0, AX_F_TSV | AX_F_TRACE),
    OP(AX_OP_TRACENZ, "tracenz", 0, 2, 0, AX_F_TRACE | AX_F_MEM),
    OP(AX_OP_TRACE16, "trace16", 2, 1, 1, AX_F_TRACE | AX_F_MEM),
    OP(AX_OP_PICK, "pick", 1, 0, 1, 0),
    OP(AX_OP_ROT, "rot", 0, 3, 3, 0),
    OP(AX_OP_PRINTF, "printf", 3, 2, 0, 0),
};

static const struct ax_opinfo unknown = {
    .name = 0, .operand_bytes = 0, .pops = 0, .pushes = 0, .flags = 0};

const struct ax_opinfo* ax_opinfo(uint8_t op) {
  if (op > AX_OP_LAST || table[op].flags == 0)
    return &unknown;
  return &table[op];
}

const char* ax_op_name(uint8_t op) {
  return ax_opinfo(op)->name;
}
