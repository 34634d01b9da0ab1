// The format of the stub's debug lines (`--debug-format=` and `monitor set
// debug-format`, as gdbserver): process-wide, since `--debug` and
// `--remote-debug` lines come from different rooms.
#pragma once

#include <cstdio>
#include <string>
#include <sys/time.h>

namespace gdbtrace {

inline bool& debug_timestamps() {
  static bool on = false;
  return on;
}

// "SECONDS.MICROSECONDS " when timestamps are on (gdbserver's format), else "".
inline std::string debug_line_prefix() {
  if (!debug_timestamps())
    return "";
  timeval tv;
  gettimeofday(&tv, nullptr);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%ld.%06ld ", static_cast<long>(tv.tv_sec),
                static_cast<long>(tv.tv_usec));
  return buf;
}

} // namespace gdbtrace
