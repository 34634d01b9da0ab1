// Where the stub drains the kernel collectors' rings during a run (issue 29).
//
// The drain runs on the stub's io_context thread. On a machine with CPUs the
// traced threads may not run on (their affinity masks, e.g. `taskset`), that
// thread is moved to those CPUs for the run, so draining takes no CPU from the
// traced threads; with no spare CPU it stays where it was. Checked at tstart
// and at each drain heartbeat (threads come and go, masks change), undone at
// the end of the run so processes the stub starts later do not inherit it.
//
// Where the drain shares its CPUs with the traced threads, it runs at the
// lowest real-time priority (SCHED_FIFO 1) for the run, when the stub may
// (root, CAP_SYS_NICE): a ring woken at its mark is drained at once instead of
// after the spinning traced threads' time slices (4 threads on 2 CPUs gave the
// stub ~0.4 CPU however much it needed, and the rings overflowed). It is
// bounded by its own work: the drain sleeps on the rings' wake-up and the
// heartbeat between drains, and the kernel's real-time throttling
// (sched_rt_runtime_us) caps it in any case. SCHED_RESET_ON_FORK: threads and
// programs the stub starts do not inherit it.
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
  // Real-time priority for the run (RAISE), or the thread's own policy back.
  void set_priority(bool raise);

  std::optional<cpu_set_t> own_; // the thread's mask before the run
  struct Policy {
    int policy;
    sched_param param;
  };
  std::optional<Policy> own_policy_; // the thread's policy before it was raised
  std::string priority_;             // "; at real-time priority ..." for where_
  std::string where_;
};

// "0-2,5" for the CPUs in SET.
std::string format_cpu_list(const cpu_set_t& set);

// Whether a drain now would find an idle CPU: fewer tasks runnable than CPUs
// online (/proc/loadavg's count, the caller's own thread not counted). Without
// one, the drain takes its CPU from a runnable task, on a traced machine most
// often a traced thread. True when the count cannot be read.
bool idle_cpu_for_drain();

} // namespace gdbtrace
