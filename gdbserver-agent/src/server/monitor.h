// `monitor ...` commands (qRcmd): the gdbserver ones plus `monitor gdbtrace ...`
// (collector selection and the trace report, from the trace engine).
#pragma once

#include <optional>
#include <string>

namespace gdbtrace {

class TraceEngine;

struct MonitorResult {
  std::string output; // console text
  std::string error;  // non-empty: the command failed
  std::optional<bool> set_debug;
  std::optional<bool> set_remote_debug;
  bool exit = false; // `monitor exit`
};

MonitorResult run_monitor_command(const std::string& command, TraceEngine* engine);

} // namespace gdbtrace
