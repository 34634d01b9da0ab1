#include "trace/tsv_increment.h"

#include "abi/ax_opcodes.h"

namespace gdbtrace {

std::optional<TsvIncrement> tsv_increment(const AgentExpr& e) {
  const auto& c = e.code;
  if (c.size() < 3 || c[0] != AX_OP_GETV)
    return std::nullopt;
  const uint32_t number = uint32_t(ax_operand(c.data() + 1, 2));
  size_t pc = 3;
  unsigned width = 0;
  if (pc < c.size() && c[pc] == AX_OP_CONST8)
    width = 1;
  else if (pc < c.size() && c[pc] == AX_OP_CONST16)
    width = 2;
  else if (pc < c.size() && c[pc] == AX_OP_CONST32)
    width = 4;
  if (!width || pc + 1 + width > c.size())
    return std::nullopt;
  const uint64_t k = ax_operand(c.data() + pc + 1, width);
  pc += 1 + width;
  if (pc >= c.size() || c[pc] != AX_OP_ADD)
    return std::nullopt;
  ++pc;
  if (pc + 1 < c.size() && c[pc] == AX_OP_EXT && c[pc + 1] == 64)
    pc += 2; // gdb's `ext 64` after the add: a no-op on 64-bit values
  if (pc + 3 > c.size() || c[pc] != AX_OP_SETV || ax_operand(c.data() + pc + 1, 2) != number)
    return std::nullopt;
  pc += 3;
  if (pc < c.size() && c[pc] == AX_OP_POP)
    ++pc;
  if (pc + 1 != c.size() || c[pc] != AX_OP_END || k > uint64_t(INT32_MAX))
    return std::nullopt;
  return TsvIncrement{number, int32_t(k)};
}

} // namespace gdbtrace
