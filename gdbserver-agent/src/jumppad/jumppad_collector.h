// The jump-pad collector: `ftrace` tracepoints as a 5-byte jmp at the site
// into machine code in the tracee (jumppad_site.h), which saves the registers,
// counts, updates TSVs and writes a record into this CPU's ring in an area
// shared with the stub (jumppad_area.h); the stub drains the rings into
// frames, polling them from IO while a run has pads (no trap, no system call
// per hit, so nothing can wake it). docs/collectors.md "Jump pad".
#pragma once

#include <memory>

#include <asio/io_context.hpp>

#include "common/result.h"
#include "target/native_target.h"
#include "trace/collector.h"

namespace gdbtrace {

// An error when the CPU has no rdtscp (the pads pick their ring with it).
Result<std::unique_ptr<Collector>> make_jumppad_collector(NativeTarget& target,
                                                          asio::io_context& io);

} // namespace gdbtrace
