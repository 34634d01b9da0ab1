// The kernel-module collector: tracepoints as uprobes handled by gdbtrace.ko
// (/dev/gdbtrace). The module evaluates conditions and actions in the uprobe
// handler and writes complete tfile frames into per-CPU rings this process
// mmap()s; drain() moves them into the engine. One open /dev/gdbtrace is one
// kernel session: closing it (destructor, or this process dying) removes every
// probe at once.
#pragma once

#include <memory>

#include <asio/io_context.hpp>

#include "common/result.h"
#include "trace/collector.h"

namespace gdbtrace {

// Fails with a plain-words reason when /dev/gdbtrace is absent (module not
// loaded) or cannot be opened (permissions).
Result<std::unique_ptr<Collector>> make_module_collector(asio::io_context& io);

} // namespace gdbtrace
