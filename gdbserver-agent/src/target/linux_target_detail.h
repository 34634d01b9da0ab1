// What the LinuxTarget files (linux_target_*.cc) share about wait statuses
// and threads: small helpers, internal to the target.
#pragma once

#include <csignal>
#include <cstdlib>
#include <sys/wait.h>

#include "target/linux_target.h"

namespace gdbtrace::linux_target_detail {

inline constexpr int kSyscallTrap = SIGTRAP | 0x80;
inline constexpr unsigned long long kEflagsTrap = 0x100; // TF
inline constexpr int stop_status(int sig) {
  return (sig << 8) | 0x7f;
}

inline bool is_plain_sigstop(int st) {
  return WIFSTOPPED(st) && WSTOPSIG(st) == SIGSTOP && (st >> 16) == 0;
}

inline StopEvent signal_event(Pid pid, Tid tid, int sig, StopReason reason = StopReason::None) {
  StopEvent e;
  e.kind = StopKind::Signalled;
  e.thread = {pid, tid};
  e.signal = sig;
  e.reason = reason;
  return e;
}

// GDBTRACE_TARGET_DEBUG=1 traces every collected status and report on stderr.
inline bool debug_enabled() {
  static const bool on = std::getenv("GDBTRACE_TARGET_DEBUG") != nullptr;
  return on;
}

inline bool is_stepping(const Lwp& l) {
  return l.kind == ResumeKind::Step || l.kind == ResumeKind::RangeStep;
}

} // namespace gdbtrace::linux_target_detail
