// Parsing of the QTDP / QTDPsrc packets into Tracepoint definitions, with every
// agent expression verified (ax_verify) before it is accepted.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "common/result.h"
#include "trace/tracepoint.h"

namespace gdbtrace {

// What bytecode may refer to: `reg` operands below num_regs, defined TSVs.
struct VerifyEnv {
  uint32_t num_regs = 0;
  std::function<bool(uint32_t)> tsv_exists;
};

// "QTDP:T..." header (the part after "QTDP:"), e.g. "1:0000000000401136:E:0:0:X3,220f27".
struct QtdpHeader {
  Tracepoint tp;             // number, address, enabled, step/pass, fast, condition
  std::string condition_hex; // as sent, for upload
  bool more = false;         // trailing '-': action packets follow
};
Result<QtdpHeader> parse_qtdp_header(std::string_view body, const VerifyEnv& env);

// "QTDP:-N:ADDR:[S]ACTIONS[-]" (BODY starts after "QTDP:-").
struct QtdpActions {
  uint32_t number = 0;
  uint64_t address = 0;
  std::string_view actions; // "[S]R...M...X...[-]"
};
Result<QtdpActions> split_qtdp_actions(std::string_view body);

// Appends the actions in TEXT to TP. STEPPING is the per-tracepoint state of
// gdb's encoding: only the first while-stepping packet carries the 'S' prefix,
// later ones continue the step actions. Returns whether a trailing '-' says
// more packets follow.
Result<bool> parse_actions(std::string_view text, bool& stepping, Tracepoint& tp,
                           const VerifyEnv& env);

// "QTDPsrc:N:ADDR:TYPE:START:SLEN:HEX" (BODY after "QTDPsrc:").
struct QtdpSource {
  uint32_t number = 0;
  uint64_t address = 0;
  std::string type;
  std::string text;
};
Result<QtdpSource> parse_qtdp_source(std::string_view body);

// Verify CODE for the context of TP (condition: no trace ops). WHAT names the
// expression in the error text.
Result<AgentExpr> verify_expr(std::vector<uint8_t> code, bool is_condition, const VerifyEnv& env,
                              const std::string& what);

} // namespace gdbtrace
