// The ptrace collector: tracepoints as int3 trap breakpoints in the tracee
// (NativeTarget::insert_trace_breakpoint). On a hit the stopped thread's
// registers come with the callback, memory is read with ptrace, the condition
// and 'X' actions run in the agent-expression VM, and the frame goes into the
// engine's buffer in one piece. Works for every tracepoint (while-stepping,
// any instruction length); the slowest collector, used as the fallback.
#pragma once

#include <memory>

#include "target/native_target.h"
#include "trace/collector.h"

namespace gdbtrace {

std::unique_ptr<Collector> make_ptrace_collector(NativeTarget& target);

} // namespace gdbtrace
