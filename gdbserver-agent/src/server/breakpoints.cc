#include "server/breakpoints.h"

#include "trace/ax_target.h"
#include "trace/tracepoint_parser.h"

namespace gdbtrace {

bool BreakpointTable::contains(Pid pid, int type, uint64_t address) const {
  return entries_.count({pid, type, address}) != 0;
}

const GdbBreakpoint* BreakpointTable::find(Pid pid, int type, uint64_t address) const {
  auto it = entries_.find({pid, type, address});
  return it == entries_.end() ? nullptr : &it->second;
}

GdbBreakpoint* BreakpointTable::find(Pid pid, int type, uint64_t address) {
  auto it = entries_.find({pid, type, address});
  return it == entries_.end() ? nullptr : &it->second;
}

void BreakpointTable::add(Pid pid, int type, uint64_t address, GdbBreakpoint bp) {
  entries_[{pid, type, address}] = std::move(bp);
}

void BreakpointTable::remove(Pid pid, int type, uint64_t address) {
  entries_.erase({pid, type, address});
}

void BreakpointTable::remove_process(Pid pid) {
  std::erase_if(entries_, [pid](const auto& e) { return std::get<0>(e.first) == pid; });
}

const GdbBreakpoint* BreakpointTable::find_conditional(Pid pid, uint64_t address) const {
  for (int type : {0, 1}) {
    auto it = entries_.find({pid, type, address});
    if (it != entries_.end() && (!it->second.conditions.empty() || !it->second.commands.empty()))
      return &it->second;
  }
  return nullptr;
}

Result<AgentExpr> verify_breakpoint_expr(const std::string& code, unsigned num_regs) {
  return verify_expr(std::vector<uint8_t>(code.begin(), code.end()), true, VerifyEnv{num_regs, {}},
                     "bad agent expression");
}

BreakpointVerdict evaluate_breakpoint(const GdbBreakpoint& bp, NativeTarget& target,
                                      ThreadId thread, const RegisterBlock& regs) {
  std::string output;
  // Conditions and commands see the thread's registers and memory; agent
  // printf output goes to gdb's console with the verdict. No TSVs here.
  AxTargetScope scope{target, thread.pid, regs, [&output](std::string text) { output += text; }};
  bool triggered = bp.conditions.empty();
  for (const auto& cond : bp.conditions) {
    uint64_t value = 0;
    int rc = ax_eval_on_target(cond, scope, &value);
    if (rc != AX_OK || value != 0) {
      triggered = true;
      break;
    }
  }
  BreakpointVerdict verdict;
  if (!triggered) {
    verdict.stop = false;
    return verdict;
  }
  // Commands (dprintf) print and let the thread go on, as gdbserver does:
  // a breakpoint with commands is never reported to gdb.
  for (const auto& cmd : bp.commands) {
    uint64_t ignored = 0;
    int rc = ax_eval_on_target(cmd, scope, &ignored);
    if (rc != AX_OK)
      output += std::string("dprintf failed: ") + ax_strerror(rc) + "\n";
  }
  verdict.stop = bp.commands.empty();
  verdict.output = std::move(output);
  return verdict;
}

} // namespace gdbtrace
