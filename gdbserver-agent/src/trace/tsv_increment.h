// `teval $v = $v + K` recognised in verified bytecode: the one TSV use that
// several keepers of a variable can each apply to their own copy and still
// agree, by summing what each added (the engine, trace_engine.cc
// check_shared_tsvs), and the one the jump pad compiles (jumppad_actions.cc).
#pragma once

#include <cstdint>
#include <optional>

#include "trace/tracepoint.h"

namespace gdbtrace {

struct TsvIncrement {
  uint32_t number; // the TSV's number
  int32_t k;
};

// Recognises `getv N; const K; add; [ext 64;] setv N; [pop;] end` (gdb's
// `teval $N = $N + K` sends it with `ext 64`), K a const8/16/32 of at most
// 2^31 - 1; nullopt for anything else.
std::optional<TsvIncrement> tsv_increment(const AgentExpr& e);

} // namespace gdbtrace
