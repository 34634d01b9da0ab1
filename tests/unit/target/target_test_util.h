// Helpers for the target tests: ELF symbol lookup and waiting for events.
#pragma once

#include <asio.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "target/native_target.h"

namespace gdbtrace::test {

std::string program_path(const std::string& name);
// Address of SYMBOL in the (non-PIE) executable PATH, 0 if absent.
uint64_t symbol_address(const std::string& path, const std::string& symbol);

// Whether this machine raises x86 debug-register traps, from the independent
// oracle tests/programs/dr_probe (some hypervisors accept DR writes and never
// trap): tests of hardware breakpoints/watchpoints expect the stub's refusal
// where it does not.
bool machine_delivers_debug_traps();

// Starts tests/programs' PROG with ARGS (through the shell when SHELL); -1
// (and a test failure) when it cannot.
Pid launch(NativeTarget& target, const std::string& prog, std::vector<std::string> args,
           bool shell = false);
// Resumes every thread of every process, delivering SIGNAL to the stopped ones.
void continue_all(NativeTarget& target, int signal = 0);

// Runs the io_context until the target reports an event or TIMEOUT passes.
class EventWaiter {
public:
  EventWaiter(asio::io_context& io, NativeTarget& target);
  std::optional<StopEvent> next(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Skips events of other kinds (they are dropped) until one of KIND arrives.
  std::optional<StopEvent> next_of(StopKind kind,
                                   std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Runs the io_context for a while without expecting anything.
  void pump(std::chrono::milliseconds duration);

private:
  asio::io_context& io_;
  std::deque<StopEvent> events_;
};

} // namespace gdbtrace::test
