// What the jump pad can do of a tracepoint's condition and actions, decided
// from the verified bytecode (AgentExpr) without generating anything: it
// compiles conditions over registers and constants (jumppad_site.h
// check_condition), `collect` of registers ($regs, arguments and locals that
// live in registers), memory ranges (gdb's 'M' actions: globals, locals on the
// stack) that fit in the record and `$tsv = $tsv + K` (one lock add in the shared area).
// Everything else is refused with the reason, and the engine gives the
// tracepoint to the next collector.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "common/result.h"
#include "jumppad/jumppad_site.h"
#include "trace/tracepoint.h"
#include "trace/tsv_increment.h"

namespace gdbtrace::jumppad {

struct PadActions {
  std::optional<AgentExpr> condition; // compiled into the pad
  bool registers = false;             // an 'R' action: the frame gets the register block
  std::vector<TsvIncrement> tsv_adds;
  std::vector<MemRange> memory; // 'M' actions, copied into the record by checked reads
};

Result<PadActions> plan_actions(const Tracepoint& tp);

} // namespace gdbtrace::jumppad
