// Verification of the agent expressions in tracepoint definitions (ax_verify
// with the engine's registers and TSVs). The QTDP packet grammar that calls it
// is in server/trace_requests.cc.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/result.h"
#include "trace/tracepoint.h"

namespace gdbtrace {

// What bytecode may refer to: `reg` operands below num_regs, defined TSVs.
struct VerifyEnv {
  uint32_t num_regs = 0;
  std::function<bool(uint32_t)> tsv_exists;
};

// Verify CODE for the context of TP (condition: no trace ops). WHAT names the
// expression in the error text.
Result<AgentExpr> verify_expr(std::vector<uint8_t> code, bool is_condition, const VerifyEnv& env,
                              const std::string& what);

} // namespace gdbtrace
