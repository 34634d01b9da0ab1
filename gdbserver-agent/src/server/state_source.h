// Where register and memory reads come from while gdb looks at the inferior:
// the live process, or the trace frame selected with tfind (QTFrame). The
// dispatcher picks one per packet, for the rows that read state, so no
// handler asks "is a trace frame selected?" itself; rows that write state are
// refused while a frame is selected.
#pragma once

#include <span>
#include <string>

#include "common/register_block.h"
#include "common/result.h"
#include "target/native_target.h"

namespace gdbtrace {

class TraceEngine;

class StateSource {
public:
  virtual ~StateSource() = default;
  virtual Result<RegisterBlock> registers() = 0;
  virtual Result<size_t> read_memory(uint64_t address, std::span<uint8_t> out) = 0;
  // The qXfer:traceframe-info:read document.
  virtual Result<std::string> traceframe_info() = 0;
};

// The live inferior: THREAD's registers, PID's memory (either may be unknown, <= 0).
class LiveState final : public StateSource {
public:
  // ENGINE (may be null) hides its collectors' int3s and jumps from memory reads.
  LiveState(NativeTarget& target, const TraceEngine* engine, ThreadId thread, Pid pid)
      : target_(target), engine_(engine), thread_(thread), pid_(pid) {}
  Result<RegisterBlock> registers() override;
  Result<size_t> read_memory(uint64_t address, std::span<uint8_t> out) override;
  Result<std::string> traceframe_info() override;

private:
  NativeTarget& target_;
  const TraceEngine* engine_;
  ThreadId thread_;
  Pid pid_;
};

// The selected trace frame: what its collector recorded (unrecorded registers
// are not valid, unrecorded memory is an error unless gdb declared it read-only).
class TraceFrameState final : public StateSource {
public:
  explicit TraceFrameState(const TraceEngine& engine) : engine_(engine) {}
  Result<RegisterBlock> registers() override;
  Result<size_t> read_memory(uint64_t address, std::span<uint8_t> out) override;
  Result<std::string> traceframe_info() override;

private:
  const TraceEngine& engine_;
};

} // namespace gdbtrace
