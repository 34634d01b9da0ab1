#include "trace/drain_placement.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

namespace gdbtrace {

namespace {

// The union of the affinity masks of PID's threads; false when none could be read.
bool threads_cpus(int pid, cpu_set_t& out) {
  CPU_ZERO(&out);
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  if (!d)
    return false;
  bool any = false;
  while (dirent* e = readdir(d)) {
    const int tid = std::atoi(e->d_name);
    cpu_set_t mask;
    if (tid <= 0 || sched_getaffinity(tid, sizeof mask, &mask) != 0)
      continue; // "." / ".." or a thread that has just exited
    CPU_OR(&out, &out, &mask);
    any = true;
  }
  closedir(d);
  return any;
}

} // namespace

bool idle_cpu_for_drain() {
  // "0.50 0.40 0.30 3/250 12345": the fourth field is runnable/total.
  // Asked at every ring wake-up and every idle tick of the drain heartbeat:
  // opened once (open and close were ~4 % of the stub's CPU in a drained
  // run), read from its start each time (the kernel makes the text anew).
  static const int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return true;
  char text[128];
  ssize_t n = pread(fd, text, sizeof text - 1, 0);
  if (n <= 0)
    return true;
  text[n] = 0;
  const char* slash = strchr(text, '/');
  if (!slash)
    return true;
  const char* p = slash;
  while (p > text && p[-1] >= '0' && p[-1] <= '9')
    --p;
  long runnable = strtol(p, nullptr, 10);
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  return cpus <= 0 || runnable - 1 < cpus;
}

std::string format_cpu_list(const cpu_set_t& set) {
  std::string out;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set))
      continue;
    int last = cpu;
    while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set))
      ++last;
    out += (out.empty() ? "" : ",") + std::to_string(cpu) +
           (last > cpu ? "-" + std::to_string(last) : std::string());
    cpu = last;
  }
  return out;
}

void DrainPlacement::place(int pid) {
  if (!own_) {
    cpu_set_t own;
    if (sched_getaffinity(0, sizeof own, &own) != 0) {
      where_ = "drain: where the scheduler puts it (its CPU mask is unreadable)";
      return;
    }
    own_ = own;
  }
  cpu_set_t traced, spare;
  if (!threads_cpus(pid, traced)) {
    sched_setaffinity(0, sizeof *own_, &*own_);
    where_ = "drain: on CPUs " + format_cpu_list(*own_) + " (the traced threads' CPUs are unknown)";
    return;
  }
  CPU_XOR(&spare, &*own_, &traced);
  CPU_AND(&spare, &spare, &*own_); // own CPUs the traced threads may not use
  if (CPU_COUNT(&spare) == 0) {
    sched_setaffinity(0, sizeof *own_, &*own_);
    set_priority(true);
    where_ = "drain: on CPUs " + format_cpu_list(*own_) +
             ", shared with the traced threads (CPUs " + format_cpu_list(traced) +
             "; no spare CPU)" + priority_;
    return;
  }
  set_priority(false);
  if (sched_setaffinity(0, sizeof spare, &spare) != 0) {
    where_ = "drain: on CPUs " + format_cpu_list(*own_) + " (moving it to spare CPUs " +
             format_cpu_list(spare) + " failed)";
    return;
  }
  where_ = "drain: on CPUs " + format_cpu_list(spare) + ", off the traced threads' CPUs " +
           format_cpu_list(traced);
}

void DrainPlacement::set_priority(bool raise) {
  if (!raise) {
    if (own_policy_)
      sched_setscheduler(0, own_policy_->policy, &own_policy_->param);
    own_policy_.reset();
    priority_.clear();
    return;
  }
  if (own_policy_)
    return; // raised already
  Policy own{sched_getscheduler(0), {}};
  sched_getparam(0, &own.param);
  const int base = own.policy < 0 ? -1 : own.policy & ~SCHED_RESET_ON_FORK;
  if (base < 0 || base == SCHED_FIFO || base == SCHED_RR)
    return; // real-time already (or unknown): left as it is
  sched_param rt{};
  rt.sched_priority = 1;
  if (sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &rt) != 0) {
    priority_ = "; real-time priority refused: " + std::string(strerror(errno));
    return;
  }
  own_policy_ = own;
  priority_ = "; at real-time priority (SCHED_FIFO 1)";
}

void DrainPlacement::restore() {
  set_priority(false);
  if (!own_)
    return;
  sched_setaffinity(0, sizeof *own_, &*own_);
  own_.reset(); // the next run reads the mask again (it may have been changed in between)
  const std::string head = "drain: ";
  if (where_.starts_with(head))
    where_ = "drain (last run): " + where_.substr(head.size());
}

} // namespace gdbtrace
