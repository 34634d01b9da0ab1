// Agent expressions over a stopped thread of the target: the one adapter from
// the VM's callbacks (ax_env) to NativeTarget memory, a RegisterBlock, the
// engine's trace state variables and a frame being built. Used by the ptrace
// collector (conditions and 'X' actions at a trap) and by the server's Z0
// conditions and dprintf commands.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/register_block.h"
#include "target/native_target.h"
#include "trace/tracepoint.h"

namespace gdbtrace {

class FrameBuilder;
class TraceContext;

struct AxTargetScope {
  NativeTarget& target;
  Pid pid;
  const RegisterBlock& regs;
  // Receives rendered agent printf output; empty: printf fails (AX_ERR_NOT_ALLOWED).
  std::function<void(std::string)> print;
  // Trace state variables (getv/setv/tracev); null: TSV opcodes fail.
  TraceContext* tsvs = nullptr;
  // Where trace/trace_quick/tracenz/tracev collect; null: they fail (AX_ERR_TRACE).
  FrameBuilder* frame = nullptr;
};

// Evaluates verified EXPR in SCOPE; returns AX_OK or the ax_status, the value
// left on the stack in *RESULT (may be null).
int ax_eval_on_target(const AgentExpr& expr, AxTargetScope& scope, uint64_t* result);

} // namespace gdbtrace
