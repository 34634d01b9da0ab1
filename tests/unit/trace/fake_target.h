// A NativeTarget double for the trace engine tests: memory is a map the test
// fills, trace breakpoints are recorded so the test can "hit" them by calling
// the collector's callback with registers it chose. Everything else is refused.
#pragma once

#include <cstring>
#include <map>

#include "target/native_target.h"

namespace gdbtrace::test {

class FakeTarget : public NativeTarget {
public:
  std::map<uint64_t, uint8_t> memory;
  std::map<uint64_t, TraceHitCallback> trace_bps;
  bool avx = true;

  void poke(uint64_t addr, const void* data, size_t len) {
    auto* p = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < len; ++i)
      memory[addr + i] = p[i];
  }
  // Simulates a thread stopping at a trace breakpoint (step 0) or after a step.
  bool hit(uint64_t addr, const RegisterBlock& regs, int step = 0, Tid tid = 100) {
    return trace_bps.at(addr)(ThreadId{1, tid}, regs.pc(), step, regs);
  }

  void set_event_handler(EventHandler) override {}
  Result<Pid> create_inferior(const LaunchSpec&) override { return unsupported(); }
  Result<void> attach(Pid) override { return unsupported(); }
  Result<void> detach(Pid) override { return unsupported(); }
  Result<void> kill(Pid) override { return unsupported(); }
  // What stopped_epoch answers (nullopt: the process is running).
  std::optional<uint64_t> epoch;
  std::optional<uint64_t> stopped_epoch(Pid) const override { return epoch; }
  std::vector<Pid> processes() const override { return {1}; }
  bool is_attached(Pid) const override { return false; }
  std::vector<ThreadInfo> threads() const override { return {}; }
  bool thread_alive(ThreadId) const override { return true; }
  void set_non_stop(bool) override {}
  Result<void> resume(const std::vector<ResumeAction>&) override { return unsupported(); }
  Result<void> interrupt(Pid) override { return unsupported(); }
  bool pause_all() override { return false; } // nothing ever runs here
  void set_pass_signals(const std::vector<bool>&) override {}
  void set_report_thread_events(bool) override {}
  void set_catch_syscalls(Pid, bool, const std::vector<int>&) override {}
  void set_fork_events(bool, bool, bool) override {}
  Result<RegisterBlock> read_registers(ThreadId) override { return unsupported(); }
  Result<void> write_registers(ThreadId, const RegisterBlock&) override { return unsupported(); }
  Result<size_t> read_memory(Pid, uint64_t address, std::span<uint8_t> out) override {
    size_t n = 0;
    for (; n < out.size(); ++n) {
      auto it = memory.find(address + n);
      if (it == memory.end())
        break;
      out[n] = it->second;
    }
    if (n == 0 && !out.empty())
      return make_error(EIO, "unmapped");
    return n;
  }
  Result<size_t> write_memory(Pid, uint64_t, std::span<const uint8_t>) override {
    return unsupported();
  }
  bool has_avx() const override { return avx; }
  Result<void> insert_breakpoint(Pid, BreakpointType, uint64_t, int) override {
    return unsupported();
  }
  Result<void> remove_breakpoint(Pid, BreakpointType, uint64_t, int) override {
    return unsupported();
  }
  Result<void> insert_trace_breakpoint(Pid, uint64_t address, TraceHitCallback cb) override {
    trace_bps[address] = std::move(cb);
    return {};
  }
  Result<void> remove_trace_breakpoint(Pid, uint64_t address) override {
    trace_bps.erase(address);
    return {};
  }
  Result<std::string> auxv(Pid) override { return unsupported(); }
  Result<std::string> exec_file(Pid) override { return unsupported(); }
  Result<std::vector<LibraryInfo>> libraries(Pid, uint64_t&) override { return unsupported(); }

private:
  static Error unsupported() { return make_error(ENOSYS, "not in the fake target"); }
};

// Registers with every GPR set to a recognisable value and rip = PC.
inline RegisterBlock make_regs(uint64_t pc) {
  RegisterBlock r;
  for (unsigned i = 0; i < GT_NUM_REGS_AVX; ++i)
    r.valid.set(i);
  for (unsigned i = 0; i < 16; ++i)
    r.set_u64(i, 0x1000 * (i + 1));
  r.set_u64(GT_RIP, pc);
  return r;
}

} // namespace gdbtrace::test
