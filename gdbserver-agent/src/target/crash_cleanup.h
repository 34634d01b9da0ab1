// Last-resort cleanup when the stub dies of a fatal signal (SIGSEGV, SIGABRT,
// SIGBUS, SIGILL, SIGFPE): the orderly detach/kill of the target cannot run
// from a signal handler, so the target publishes a table of what it changed in
// its tracees (processes, inserted int3s with their original bytes) and the
// handler undoes it with raw syscalls only: original bytes written back
// through /proc/PID/mem, threads in a ptrace-stop rewound past our int3 and
// detached, processes the stub started killed. Then the signal's default
// action runs (core dump).
//
// A thread running at that moment is stopped (SIGSTOP, waited for up to
// ~200 ms) so that its debug registers can be cleared before the detach; one
// that does not stop is detached by the kernel when the stub exits (our int3s
// are already gone, but a hardware breakpoint of gdb's stays armed in it).
#pragma once

#include <cstdint>
#include <span>
#include <sys/types.h>

namespace gdbtrace::crash_cleanup {

struct ProcessEntry {
  pid_t pid = 0;
  bool attached = false; // detach it; otherwise the stub started it: kill it
};

struct BreakpointEntry {
  pid_t pid = 0;
  uint64_t address = 0;
  uint8_t original = 0;
};

// Replaces the published table (called by the target after a change of its
// processes). Beyond the fixed capacity the excess is dropped and counted.
class Publisher {
public:
  void begin();
  void add_process(const ProcessEntry& p);
  void add_breakpoint(const BreakpointEntry& b);
  void commit();

private:
  int slot_ = 0;
};

// One int3 inserted, removed, or its original byte changed, in O(1): the
// target calls these per breakpoint, so that inserting thousands of them
// (tracepoints on ptrace) does not rebuild the table per insert.
void breakpoint_set(const BreakpointEntry& b); // added, or its original byte updated
void breakpoint_removed(pid_t pid, uint64_t address);

// FN runs first in the cleanup, before any byte is restored or thread
// detached (async-signal-safe only): a collector turns off what would be
// unsafe in a tracee without its ptracer (the jump pad's memory reads).
void set_before_detach(void (*fn)());

// Installs the fatal-signal handlers (on an alternate stack, so a stack
// overflow still cleans up).
void install_handlers();

// The cleanup itself, async-signal-safe; exposed for tests.
void run();

// Entries the last commit could not hold (0 when the table is complete).
unsigned dropped();

} // namespace gdbtrace::crash_cleanup
