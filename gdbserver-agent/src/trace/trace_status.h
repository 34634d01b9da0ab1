// The run status the engine reports in qTStatus and writes into tfile headers.
#pragma once

#include <cstdint>
#include <string>

#include "trace/collector.h"

namespace gdbtrace {

struct TraceStatus {
  bool running = false;
  bool ever_ran = false; // false: "tnotrun"
  TraceStopReason reason = TraceStopReason::None;
  std::string stop_text; // tstop note / terror text (plain)
  uint32_t stop_tp = 0;  // tpasscount / terror tracepoint
  uint64_t frames = 0, created = 0, size = 0, free = 0;
  bool circular = false, disconnected_tracing = false;
  int64_t start_time = 0, stop_time = 0; // µs, steady clock (as gdbserver)
  std::string user, notes;               // QTNotes (plain)
};

// The qTStatus reply, field for field as gdbserver 13 formats it.
std::string format_qtstatus(const TraceStatus& st);

// The "status ..." line of a tfile header, as gdb's tfile writer formats it.
std::string format_tfile_status(const TraceStatus& st);

// "tnotrun", "tstop", "tfull", ... (the stop reason word gdb uses).
const char* stop_reason_word(const TraceStatus& st);

} // namespace gdbtrace
