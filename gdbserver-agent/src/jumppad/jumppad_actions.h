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

namespace gdbtrace::jumppad {

struct TsvIncrement {
  uint32_t number; // the TSV's number
  int32_t k;
};

struct PadActions {
  std::optional<AgentExpr> condition; // compiled into the pad
  bool registers = false;             // an 'R' action: the frame gets the register block
  std::vector<TsvIncrement> tsv_adds;
  std::vector<MemRange> memory; // 'M' actions, copied into the record by checked reads
};

// Recognises `getv N; const K; add; [ext 64;] setv N; [pop;] end` (gdb's
// `teval $N = $N + K` sends it with `ext 64`).
Result<TsvIncrement> tsv_increment(const AgentExpr& e);

Result<PadActions> plan_actions(const Tracepoint& tp);

} // namespace gdbtrace::jumppad
