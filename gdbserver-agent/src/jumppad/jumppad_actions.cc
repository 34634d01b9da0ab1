#include "jumppad/jumppad_actions.h"

#include <string>

#include "abi/ax_opcodes.h"
#include "jumppad/jumppad_site.h"

namespace gdbtrace::jumppad {
namespace {

Error refuse(const std::string& why) {
  return Error{EOPNOTSUPP, why};
}

uint64_t big_endian(const std::vector<uint8_t>& code, size_t at, unsigned n) {
  uint64_t v = 0;
  for (unsigned i = 0; i < n; ++i)
    v = v << 8 | code[at + i];
  return v;
}

// An 'X' action that only computes from registers (gdb's `collect VAR` of a
// variable living in a register sends one beside the 'R' mask naming that
// register): it puts nothing in the frame, so the 'R' block is the collection.
// Division is left out (by zero it is an error the frame would have to show).
bool register_only(const AgentExpr& e) {
  const auto& c = e.code;
  for (size_t pc = 0; pc < c.size();) {
    switch (c[pc]) {
    case AX_OP_REG:
    case AX_OP_CONST8:
    case AX_OP_CONST16:
    case AX_OP_CONST32:
    case AX_OP_CONST64:
    case AX_OP_ADD:
    case AX_OP_SUB:
    case AX_OP_MUL:
    case AX_OP_LSH:
    case AX_OP_RSH_SIGNED:
    case AX_OP_RSH_UNSIGNED:
    case AX_OP_EXT:
    case AX_OP_ZERO_EXT:
    case AX_OP_BIT_AND:
    case AX_OP_BIT_OR:
    case AX_OP_BIT_XOR:
    case AX_OP_BIT_NOT:
    case AX_OP_LOG_NOT:
    case AX_OP_EQUAL:
    case AX_OP_LESS_SIGNED:
    case AX_OP_LESS_UNSIGNED:
    case AX_OP_DUP:
    case AX_OP_POP:
    case AX_OP_SWAP:
      pc += 1 + ax_opinfo(c[pc])->operand_bytes;
      break;
    case AX_OP_END:
      return pc + 1 == c.size();
    default:
      return false;
    }
  }
  return false;
}

// Whether E reads target memory (ref*, trace*: gdb's `collect *p`): refused
// with the memory reason, which says more than "not a TSV increment".
bool reads_memory(const AgentExpr& e) {
  const auto& c = e.code;
  for (size_t pc = 0; pc < c.size();) {
    const struct ax_opinfo* info = ax_opinfo(c[pc]);
    if (!info || !(info->flags & AX_F_KNOWN) || c[pc] == AX_OP_PRINTF)
      return false; // printf's operand has no fixed length; not a memory read anyway
    if (info->flags & AX_F_MEM)
      return true;
    pc += 1 + info->operand_bytes;
  }
  return false;
}

const char* const kNoMemory = "memory collection is not done by the jump pad yet (a bad pointer "
                              "must not crash the tracee)";

} // namespace

Result<TsvIncrement> tsv_increment(const AgentExpr& e) {
  const auto& c = e.code;
  const Error no = refuse("the jump pad compiles only `$tsv = $tsv + K` expressions (this slice)");
  if (c.size() < 3 || c[0] != AX_OP_GETV)
    return no;
  const uint32_t number = uint32_t(big_endian(c, 1, 2));
  size_t pc = 3;
  unsigned width = 0;
  if (pc < c.size() && c[pc] == AX_OP_CONST8)
    width = 1;
  else if (pc < c.size() && c[pc] == AX_OP_CONST16)
    width = 2;
  else if (pc < c.size() && c[pc] == AX_OP_CONST32)
    width = 4;
  if (!width || pc + 1 + width > c.size())
    return no;
  const uint64_t k = big_endian(c, pc + 1, width);
  pc += 1 + width;
  if (pc >= c.size() || c[pc] != AX_OP_ADD)
    return no;
  ++pc;
  if (pc + 1 < c.size() && c[pc] == AX_OP_EXT && c[pc + 1] == 64)
    pc += 2; // gdb's `ext 64` after the add: a no-op on 64-bit values
  if (pc + 3 > c.size() || c[pc] != AX_OP_SETV || big_endian(c, pc + 1, 2) != number)
    return no;
  pc += 3;
  if (pc < c.size() && c[pc] == AX_OP_POP)
    ++pc;
  if (pc + 1 != c.size() || c[pc] != AX_OP_END)
    return no;
  if (k > uint64_t(INT32_MAX))
    return refuse("a TSV increment above 2^31 - 1");
  return TsvIncrement{number, int32_t(k)};
}

Result<PadActions> plan_actions(const Tracepoint& tp) {
  if (tp.step_count)
    return refuse("while-stepping needs the ptrace collector");
  PadActions out;
  if (tp.has_condition) {
    if (auto c = check_condition(tp.condition); !c)
      return c.error();
    out.condition = tp.condition;
  }
  for (const TraceAction& a : tp.actions) {
    if (std::holds_alternative<CollectRegisters>(a)) {
      out.registers = true;
    } else if (std::holds_alternative<CollectMemory>(a)) {
      return refuse(kNoMemory);
    } else if (register_only(std::get<CollectExpr>(a).expr)) {
      continue;
    } else if (reads_memory(std::get<CollectExpr>(a).expr)) {
      return refuse(kNoMemory);
    } else {
      auto inc = tsv_increment(std::get<CollectExpr>(a).expr);
      if (!inc)
        return inc.error();
      out.tsv_adds.push_back(*inc);
    }
  }
  return out;
}

} // namespace gdbtrace::jumppad
