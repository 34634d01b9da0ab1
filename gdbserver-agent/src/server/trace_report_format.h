// Renderings of the engine's TraceReport besides qTStatus (which is
// format_qtstatus in trace/trace_status.h, shared with the tfile header):
// the JSON of qGdbtrace.status that the GDB plugin reads, and the text of
// `monitor gdbtrace status`.
#pragma once

#include <string>

#include "trace/trace_status.h"

namespace gdbtrace {

// Keys and values are a contract with gdb-plugin/ (and tests): keep them.
std::string format_report_json(const TraceReport& report);

std::string format_report_text(const TraceReport& report);

// The "stream: ..." line of `monitor gdbtrace status` and `monitor gdbtrace
// stream`: where frames are streamed, how many are written (RUNNING: a run is
// in progress).
std::string format_stream_line(const StreamReport& stream, bool running);

} // namespace gdbtrace
