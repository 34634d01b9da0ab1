#include "server/state_source.h"

#include <cerrno>

#include "trace/trace_engine.h"

namespace gdbtrace {

// EPERM (1) is what the g/p/m handlers answer as "E01" when there is no
// thread or process to read from, as gdbserver does.
Result<RegisterBlock> LiveState::registers() {
  if (thread_.tid <= 0)
    return make_error(EPERM, "no thread");
  return target_.read_registers(thread_);
}

Result<size_t> LiveState::read_memory(uint64_t address, std::span<uint8_t> out) {
  if (pid_ <= 0)
    return make_error(EPERM, "no process");
  auto n = target_.read_memory(pid_, address, out);
  if (n && engine_)
    engine_->hide_collector_text(pid_, address, out.first(*n));
  return n;
}

Result<std::string> LiveState::traceframe_info() {
  return make_error(EINVAL, "no trace frame selected");
}

Result<RegisterBlock> TraceFrameState::registers() {
  return engine_.frame_registers();
}

Result<size_t> TraceFrameState::read_memory(uint64_t address, std::span<uint8_t> out) {
  return engine_.frame_memory(address, out);
}

Result<std::string> TraceFrameState::traceframe_info() {
  return engine_.traceframe_info_xml();
}

} // namespace gdbtrace
