// The eBPF collector: each tracepoint becomes a uprobe (perf uprobe PMU,
// filtered to the traced process, all its threads) running a BPF program
// generated from the tracepoint's condition and actions (bpf_codegen.h).
// Frames arrive in a BPF ring buffer already in tfile layout and are drained
// from the io_context into the engine.
#pragma once

#include <memory>

#include <asio/io_context.hpp>

#include "common/result.h"
#include "trace/collector.h"

namespace gdbtrace {

// Fails, with the kernel's reason in plain words, when this kernel or these
// privileges cannot run it (no CAP_BPF/CAP_PERFMON, no uprobe PMU, ...).
Result<std::unique_ptr<Collector>> make_bpf_collector(asio::io_context& io);

} // namespace gdbtrace
