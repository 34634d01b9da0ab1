// Helpers the trace engine's tests share: a shell command's output (to ask the
// real gdb about a file), and an engine with the ptrace collector over a fake
// target whose console text the test keeps.
#pragma once

#include <cstdio>
#include <memory>
#include <string>

#include <asio.hpp>
#include <gtest/gtest.h>

#include "fake_target.h"
#include "server/packet_table.h"
#include "server/trace_protocol.h"
#include "trace/ptrace_collector.h"
#include "trace/trace_engine.h"

namespace gdbtrace::test {

// What the shell command CMD writes to stdout.
inline std::string run_command(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p)
    return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0)
    out.append(buf, n);
  pclose(p);
  return out;
}

// An engine over TARGET (the process is pid 1) with the ptrace collector; its
// console text is appended to CONSOLE.
inline std::unique_ptr<TraceEngine> make_test_engine(asio::io_context& io, NativeTarget& target,
                                                     std::string& console) {
  TraceEngine::Hooks hooks;
  hooks.console = [&console](const std::string& s) { console += s; };
  hooks.current_pid = [] { return Pid(1); };
  auto engine = std::make_unique<TraceEngine>(io, target, hooks);
  engine->add_collector(make_ptrace_collector(target));
  return engine;
}

// What a test driving the engine through the tracepoint packet rows holds: the
// io_context, a fake target, the console text, the engine, the protocol and
// its rows.
class TraceTestBase : public ::testing::Test {
protected:
  asio::io_context io;
  FakeTarget target;
  std::string console;
  std::unique_ptr<TraceEngine> engine;
  std::unique_ptr<TraceProtocol> protocol;
  PacketTable packets;
};

} // namespace gdbtrace::test
