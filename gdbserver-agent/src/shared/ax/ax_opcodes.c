/*
 * The opcode table of abi/ax_opcodes.def as an array indexed by opcode.
 */
#include "abi/ax_opcodes.h"
#include "ax/ax.h"

#define AX_OPCODE(code, sym, nm, operand, pop, push, fl)                                           \
  [code] = {.name = nm,                                                                            \
            .operand_bytes = operand,                                                              \
            .pops = pop,                                                                           \
            .pushes = push,                                                                        \
            .flags = AX_F_KNOWN | (fl)},

static const struct ax_opinfo table[AX_OP_LAST + 1] = {
#include "abi/ax_opcodes.def"
};
#undef AX_OPCODE

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
