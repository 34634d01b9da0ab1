// `monitor ...` commands (qRcmd): the gdbserver ones plus `monitor gdbtrace ...`
// (collector selection and the trace report, from the trace engine).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"

namespace gdbtrace {

class TraceEngine;

struct MonitorResult {
  std::string command; // what the user typed, trimmed
  std::string output;  // console text
  std::string error;   // non-empty: the command failed
  std::optional<bool> set_debug;
  std::optional<bool> set_remote_debug;
  std::optional<bool> set_debug_timestamps;             // `set debug-format`
  std::optional<std::string> set_thread_db_search_path; // "" = gdbserver's default
  bool exit = false;                                    // `monitor exit`
};

// `--debug-format=` and `monitor set debug-format`: comma-separated options
// all|none|timestamp, applied in order from "everything off" (gdbserver's
// semantics); MESSAGES gets gdbserver's line per option; error for others.
struct DebugFormat {
  bool timestamps = false;
  std::string messages;
};
Result<DebugFormat> parse_debug_format(std::string_view options);

MonitorResult run_monitor_command(const std::string& command, TraceEngine* engine);

} // namespace gdbtrace
