#include "jumppad/jumppad_actions.h"

#include <string>

#include "abi/amd64_regs.h"
#include "abi/ax_opcodes.h"
#include "jumppad/jumppad_layout.h"
#include "jumppad/jumppad_site.h"

namespace gdbtrace::jumppad {
namespace {

Error refuse(const std::string& why) {
  return Error{EOPNOTSUPP, why};
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

const char* const kNoMemory = "memory reads in expressions (`collect *p`) are not compiled by the "
                              "jump pad yet; memory ranges (`collect some_global`) are";

// A `const*` at PC: its value, PC moved past it.
std::optional<uint64_t> constant_at(const std::vector<uint8_t>& c, size_t& pc) {
  if (pc >= c.size() || c[pc] < AX_OP_CONST8 || c[pc] > AX_OP_CONST64)
    return std::nullopt;
  const unsigned n = 1u << (c[pc] - AX_OP_CONST8);
  if (pc + 1 + n > c.size())
    return std::nullopt;
  uint64_t v = ax_operand(c.data() + pc + 1, n);
  pc += 1 + n;
  return v;
}

// gdb's `collect some_struct.field` or `collect arr[3]` of a global: an 'X'
// action that traces a constant address, `const ADDR; (const LEN; trace |
// trace_quick LEN | trace16 LEN); end`: the same read as an absolute range.
std::optional<CollectMemory> constant_trace(const AgentExpr& e) {
  const auto& c = e.code;
  size_t pc = 0;
  auto addr = constant_at(c, pc);
  if (!addr || pc >= c.size())
    return std::nullopt;
  std::optional<uint64_t> len;
  if (c[pc] == AX_OP_TRACE_QUICK && pc + 2 <= c.size()) {
    len = c[pc + 1];
    pc += 2;
  } else if (c[pc] == AX_OP_TRACE16 && pc + 3 <= c.size()) {
    len = ax_operand(c.data() + pc + 1, 2);
    pc += 3;
  } else if ((len = constant_at(c, pc)) && pc < c.size() && c[pc] == AX_OP_TRACE) {
    pc += 1;
  } else {
    return std::nullopt;
  }
  if (pc + 1 != c.size() || c[pc] != AX_OP_END || *len > UINT32_MAX)
    return std::nullopt;
  return CollectMemory{-1, int64_t(*addr), uint32_t(*len)};
}

// An 'M' action as the pad reads it: a bounded range, absolute or relative to
// a register the pad saves; it must fit in the record beside the others.
Result<void> add_memory_range(const CollectMemory& m, std::vector<MemRange>& out) {
  if (m.stack)
    return refuse("the stack snapshot (`monitor gdbtrace stacks`) is not taken by the jump pad");
  if (m.length == 0)
    return refuse("an empty memory range");
  if (m.basereg >= 0 && m.basereg > GT_R15 && m.basereg != GT_RIP)
    return refuse("a memory range relative to register " + std::to_string(m.basereg) +
                  ", which the jump pad does not save");
  if (out.size() == kMaxMemRanges)
    return refuse("more than " + std::to_string(kMaxMemRanges) + " memory ranges");
  size_t used = m.length;
  for (const MemRange& r : out)
    used += r.length;
  if (used > kRecordMemBytes)
    return refuse("memory ranges of " + std::to_string(used) +
                  " bytes in all: the jump pad's record holds " + std::to_string(kRecordMemBytes));
  out.push_back({m.basereg, uint64_t(m.offset), m.length});
  return ok();
}

} // namespace

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
    } else if (auto* m = std::get_if<CollectMemory>(&a)) {
      if (auto r = add_memory_range(*m, out.memory); !r)
        return r.error();
    } else if (register_only(std::get<CollectExpr>(a).expr)) {
      continue;
    } else if (auto m = constant_trace(std::get<CollectExpr>(a).expr)) {
      if (auto r = add_memory_range(*m, out.memory); !r)
        return r.error();
    } else if (reads_memory(std::get<CollectExpr>(a).expr)) {
      return refuse(kNoMemory);
    } else {
      auto inc = tsv_increment(std::get<CollectExpr>(a).expr);
      if (!inc)
        return refuse("the jump pad compiles only `$tsv = $tsv + K` expressions, K below 2^31");
      out.tsv_adds.push_back(*inc);
    }
  }
  return out;
}

} // namespace gdbtrace::jumppad
