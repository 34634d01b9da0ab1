// Where the stub drains the kernel collectors' rings during a run (issue 29).
//
// The drain runs on the stub's io_context thread. On a machine with CPUs the
// traced threads may not run on (their affinity masks, e.g. `taskset`), that
// thread is moved to those CPUs for the run, so draining takes no CPU from the
// traced threads; with no spare CPU it stays where it was. Checked at tstart
// and at each drain heartbeat (threads come and go, masks change), undone at
// the end of the run so processes the stub starts later do not inherit it.
#pragma once

#include <sched.h>

#include <optional>
#include <string>

namespace gdbtrace {

class DrainPlacement {
public:
  // Moves the calling thread to the CPUs of its own mask (as it was before the
  // run) outside every thread of process PID's mask, or back to its own mask
  // when there is no such CPU.
  void place(int pid);
  // The calling thread back to its mask from before the run (where() then
  // tells where the last run's drain ran).
  void restore();
  // "drain: ..." for `monitor gdbtrace status`; empty before the first run.
  const std::string& where() const { return where_; }

private:
  std::optional<cpu_set_t> own_; // the thread's mask before the run
  std::string where_;
};

// "0-2,5" for the CPUs in SET.
std::string format_cpu_list(const cpu_set_t& set);

} // namespace gdbtrace
