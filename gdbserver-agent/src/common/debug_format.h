// The format and destination of the stub's debug lines (`--debug-format=`,
// `monitor set debug-format` and `--debug-file=`, as gdbserver): process-wide,
// since `--debug` and `--remote-debug` lines come from different rooms.
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

// Where debug lines go: stderr, or the --debug-file (only the debug lines, as
// gdbserver: "Listening on port" and the inferior's messages stay on stderr,
// where gdb's testsuite and scripts wait for them).
inline FILE*& debug_stream() {
  static FILE* out = stderr;
  return out;
}

// One debug line from ROOM ("remote", "gdbtrace"), flushed at once: a stub
// killed by its user (or by gdb's testsuite) leaves every line written so far.
inline void debug_line(const char* room, const std::string& text) {
  std::fprintf(debug_stream(), "%s[%s] %s\n", debug_line_prefix().c_str(), room, text.c_str());
  std::fflush(debug_stream());
}

} // namespace gdbtrace
