// The stub's open-file limit. Each tracepoint in the eBPF collector holds a
// file descriptor (its link or perf event) for the whole run, and a loaded
// program until it is attached, so thousands of tracepoints need more than the
// usual soft limit of 1024: the stub raises its soft limit to the hard one at
// start. Programs it runs get the limit it started with back, as they would
// have had without it (select() and fd-walking code expect the usual value).
#pragma once

#include <sys/resource.h>

namespace gdbtrace {

inline rlimit& startup_open_file_limit() {
  static rlimit limit{RLIM_INFINITY, RLIM_INFINITY};
  return limit;
}

// Called once, first thing in the server.
inline void raise_open_file_limit() {
  rlimit& start = startup_open_file_limit();
  if (getrlimit(RLIMIT_NOFILE, &start) != 0)
    return;
  rlimit raised = start;
  raised.rlim_cur = start.rlim_max;
  setrlimit(RLIMIT_NOFILE, &raised); // a failure keeps the old limit: fewer tracepoints fit
}

// In a forked child before exec (async-signal-safe).
inline void restore_open_file_limit() {
  const rlimit& start = startup_open_file_limit();
  if (start.rlim_cur != RLIM_INFINITY || start.rlim_max != RLIM_INFINITY)
    setrlimit(RLIMIT_NOFILE, &start);
}

} // namespace gdbtrace
