// A tracepoint as gdb defined it (QTDP/QTDPsrc), after parsing and verification,
// and a trace state variable (QTDV).
//
// Owned by the TraceEngine; collectors receive a const reference when they
// install probes, and while a probe is installed can ask for it again
// (TraceContext::definition) rather than keep a copy.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "ax/ax.h"

namespace gdbtrace {

// A verified agent expression (condition, 'X' action, or Z0 condition/command)
// with what ax_verify proved about it, so no collector decodes bytecode again.
struct AgentExpr {
  std::vector<uint8_t> code;
  ax_verified info{};
  // Stack depth before the instruction at each pc (ax_depth_before): -1 where
  // no instruction starts or none is reachable. Same length as CODE.
  std::vector<int16_t> depth;
  // Trace state variables the program reads (getv, tracev) and writes (setv),
  // sorted, without repeats.
  std::vector<uint32_t> tsvs_read, tsvs_written;
};

// QTDP actions. Order matters: frames hold blocks in action order.
struct CollectRegisters {    // 'R' mask: all registers for collect $regs, else those named
  std::vector<uint8_t> mask; // bit N = register N, as sent (hex decoded, LSB first)
  bool names(unsigned regno) const {
    return regno / 8 < mask.size() && (mask[regno / 8] >> (regno % 8)) & 1;
  }
};
struct CollectMemory { // 'M' basereg,offset,len — basereg -1 = absolute
  int basereg = -1;
  int64_t offset = 0;
  uint32_t length = 0;
  // Added by the engine for `monitor gdbtrace stacks on`, not by gdb: a piece
  // of the stack snapshot at $sp. Past the end of the stack mapping it cannot
  // be read, which ends the snapshot there and is not an evaluation error.
  bool stack = false;
};
struct CollectExpr { // 'X' len,bytes — trace/trace_quick/tracenz/tracev inside
  AgentExpr expr;
};
using TraceAction = std::variant<CollectRegisters, CollectMemory, CollectExpr>;

struct Tracepoint {
  uint32_t number = 0;
  uint64_t address = 0;
  bool enabled = true;
  uint64_t step_count = 0;   // while-stepping N (0: none)
  uint64_t pass_count = 0;   // stop the run after this many hits (0: no limit)
  bool fast = false;         // ftrace ('F' in QTDP)
  uint32_t fast_min_len = 0; // 'F<len>' instruction length gdb accepted
  bool has_condition = false;
  AgentExpr condition;                   // 'X' in the QTDP header
  std::vector<TraceAction> actions;      // collected at the hit
  std::vector<TraceAction> step_actions; // collected at each while-stepping step ('S' prefix)
  std::vector<std::string> source;       // QTDPsrc strings, replayed on upload (qTfP/qTsP)
  std::vector<std::string> source_types; // "at", "cond", "cmd" for each source string
  // Action texts exactly as received, one per action, for the upload (qTsP "A"/"S"
  // pieces) and for recognising an identical re-definition.
  std::vector<std::string> action_texts;
  std::vector<std::string> step_action_texts;
};

// A trace state variable as gdb defines it (QTDV) and gets it back (qTfV, tfile).
struct TsvDefinition {
  uint32_t number = 0;
  int64_t initial = 0;
  bool builtin = false; // $trace_timestamp: its value comes from the clock
  std::string name;
};

} // namespace gdbtrace
