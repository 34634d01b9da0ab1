// The CPUs the stub was started on. During a run the stub may move itself
// (its event loop, which drains the collectors) off the traced threads' CPUs
// (trace/drain_placement.h); a program it starts meanwhile must not inherit
// that placement: it gets the mask the stub was started with, as it would
// have without the stub.
#pragma once

#include <sched.h>

namespace gdbtrace {

struct StartupAffinity {
  cpu_set_t cpus;
  bool known = false;
};

inline StartupAffinity& startup_affinity() {
  static StartupAffinity a{};
  return a;
}

// Called once, first thing in the server.
inline void remember_startup_affinity() {
  StartupAffinity& a = startup_affinity();
  a.known = sched_getaffinity(0, sizeof a.cpus, &a.cpus) == 0;
}

// In a forked child before exec (async-signal-safe: one system call).
inline void restore_startup_affinity() {
  const StartupAffinity& a = startup_affinity();
  if (a.known)
    sched_setaffinity(0, sizeof a.cpus, &a.cpus);
}

} // namespace gdbtrace
