// gdb's Z/z breakpoints as the server tracks them: which are inserted in the
// target, and the target-side conditions and commands (agent dprintf) gdb
// attached to Z0/Z1 packets.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "common/result.h"
#include "target/native_target.h"
#include "trace/tracepoint.h"

namespace gdbtrace {

struct GdbBreakpoint {
  std::vector<AgentExpr> conditions; // any true -> the breakpoint stops
  std::vector<AgentExpr> commands;   // run (agent printf) when it triggers
  bool persist = false;
  // A Z0 placed in a debug register instead of an int3, because an in-kernel
  // collector's uprobe owns the int3 at that address and would swallow the trap.
  bool via_debug_register = false;
};

class BreakpointTable {
public:
  using Key = std::tuple<Pid, int /*type*/, uint64_t /*address*/>;

  bool contains(Pid pid, int type, uint64_t address) const;
  const GdbBreakpoint* find(Pid pid, int type, uint64_t address) const;
  GdbBreakpoint* find(Pid pid, int type, uint64_t address);
  void add(Pid pid, int type, uint64_t address, GdbBreakpoint bp);
  void remove(Pid pid, int type, uint64_t address);
  void remove_process(Pid pid);
  // The code breakpoint (software or hardware) at ADDRESS, if it has conditions or commands.
  const GdbBreakpoint* find_conditional(Pid pid, uint64_t address) const;

private:
  std::map<Key, GdbBreakpoint> entries_;
};

// Verifies condition/command bytecode from a Z packet; the error names the
// problem (shown to the user as the breakpoint insertion failure).
Result<AgentExpr> verify_breakpoint_expr(const std::string& code, unsigned num_regs);

struct BreakpointVerdict {
  bool stop = true;   // report the hit to gdb
  std::string output; // agent printf output for gdb's console
};

// Evaluates BP's conditions (and, when one holds, its commands) for THREAD,
// stopped at the breakpoint with registers REGS. Evaluation errors count as
// "stop", as in gdbserver: a broken condition must not hide a breakpoint.
BreakpointVerdict evaluate_breakpoint(const GdbBreakpoint& bp, NativeTarget& target,
                                      ThreadId thread, const RegisterBlock& regs);

} // namespace gdbtrace
