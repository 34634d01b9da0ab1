// The tracepoint packets' grammar (QT*, qT*, qGdbtrace.*), in one place: each
// parser takes the packet's arguments (the text after the packet name, as the
// handler table matched it) and returns a typed request for the TraceEngine, or
// an error whose text becomes the "E." reply. Replies are formatted in
// server/trace_protocol.cc.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"
#include "trace/trace_engine.h"

namespace gdbtrace {

// "QTDP:N:ADDR:E|D:STEP:PASS[:F<len>][:X<len>,<hex>][-]"; the condition is
// verified against ENV.
Result<TracepointDefinition> parse_qtdp(std::string_view args, const VerifyEnv& env);

// "QTDP:-N:ADDR:[S]ACTIONS[-]" (ARGS start after "QTDP:-"). Fails only when N
// or ADDR do not parse; a bad action list travels inside the request.
Result<TracepointActions> parse_qtdp_actions(std::string_view args, const VerifyEnv& env);

// The action list of one QTDP:- packet ("R..", "M..", "X..", optional 'S' first
// and '-' last). NUMBER names the tracepoint in error texts.
Result<ActionList> parse_action_list(std::string_view text, uint32_t number, const VerifyEnv& env);

// "QTDPsrc:N:ADDR:TYPE:START:SLEN:HEX".
Result<TracepointSource> parse_qtdpsrc(std::string_view args);

// "QTDV:N:VALUE:BUILTIN:HEXNAME".
Result<TsvDefinition> parse_qtdv(std::string_view args);

// "QTro[:START,END]..." (ARGS start after "QTro"). Ends inclusive, as gdb sends them.
Result<std::vector<std::pair<uint64_t, uint64_t>>> parse_qtro(std::string_view args);

// "N:ADDR" of QTEnable, QTDisable and qTP.
struct TracepointRef {
  uint32_t number = 0;
  uint64_t address = 0;
};
Result<TracepointRef> parse_tracepoint_ref(std::string_view args, std::string_view packet_name);

// "QTFrame:N", "QTFrame:pc:PC", "QTFrame:tdp:N", "QTFrame:range:A:B",
// "QTFrame:outside:A:B"; "QTFrame:ffffffff" selects no frame (tfind none).
Result<FrameQuery> parse_qtframe(std::string_view args);

// A hex number used as a flag (QTDisconnected:V, QTBuffer:circular:V).
Result<bool> parse_hex_flag(std::string_view args, std::string_view packet_name);

// "QTBuffer:size:N" or "QTBuffer:size:-1" (nullopt: the default size).
Result<std::optional<uint64_t>> parse_qtbuffer_size(std::string_view args);

// "QTNotes:[user:HEX;][notes:HEX;][tstop:HEX;]".
Result<TraceNotes> parse_qtnotes(std::string_view args);

// "QTSave:HEXPATH".
Result<std::string> parse_qtsave(std::string_view args);

// "qTV:N".
Result<uint32_t> parse_qtv(std::string_view args);

// "OFFSET,LENGTH" of qTBuffer and qGdbtrace.frames. USAGE completes the error text.
struct ByteRange {
  uint64_t offset = 0, length = 0;
};
Result<ByteRange> parse_byte_range(std::string_view args, std::string_view what);

} // namespace gdbtrace
