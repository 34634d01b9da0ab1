// The run status the engine reports in qTStatus and writes into tfile headers,
// and the TraceReport (status + per-tracepoint counters) that qTStatus, the
// qGdbtrace.status JSON and `monitor gdbtrace status` all render.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trace/collector.h"

namespace gdbtrace {

struct TraceStatus {
  bool running = false;
  bool ever_ran = false; // false: "tnotrun"
  TraceStopReason reason = TraceStopReason::None;
  std::string stop_text; // tstop note / terror text (plain)
  uint32_t stop_tp = 0;  // tpasscount / terror tracepoint
  uint64_t frames = 0, created = 0, size = 0, free = 0;
  bool circular = false, disconnected_tracing = false;
  int64_t start_time = 0, stop_time = 0; // µs, steady clock (as gdbserver)
  std::string user, notes;               // QTNotes (plain)
};

// One tracepoint location in a report. Each counter has one owner:
//   hits, errors        - the collector (Collector::stats): it sees every hit,
//                          including those that never became a frame;
//   frames, bytes       - the engine: frames the trace buffer accepted;
//   drops               - both, for different losses: frames the collector
//                          lost before the engine saw them (a full kernel ring)
//                          plus frames the trace buffer refused (tfull);
//   after_stop          - the collector: hits after the run stopped or a stop
//                          was pending, before the probe was removed (no frame).
// For a location without while-stepping, hits = frames + drops + after_stop
// (a hit whose actions failed to evaluate, the terror stop, makes no frame
// and is in errors).
struct TracepointReport {
  uint32_t number = 0;
  uint64_t address = 0;
  bool enabled = true, fast = false;
  std::string backend; // collector name, "" before it was ever installed
  uint64_t hits = 0, frames = 0, bytes = 0, drops = 0, errors = 0;
  uint64_t after_stop = 0;
  uint64_t emulated = 0; // the collector's: hits that skipped the kernel's single-step
  std::string note;      // why not the collector it would have had, or ""
};

// `monitor gdbtrace stream`: where the run's frames go as they are drained
// (trace/trace_stream.h), and how far they got.
struct StreamReport {
  std::string path;               // "" = not streaming
  bool writing = false;           // a run is writing the file now
  uint64_t frames = 0, bytes = 0; // in the file (the last run's once it ended)
  uint64_t lost = 0;              // frames the buffer discarded before they were written
  std::string error;              // why streaming stopped early, or ""
  bool direct = false; // its frames went to the disk directly (O_DIRECT), not via the page cache
  uint64_t longest_disk_wait_us = 0; // TraceStream::longest_disk_wait_us
  uint64_t longest_write_us = 0;     // TraceStream::longest_write_us
};

struct TraceReport {
  TraceStatus status;
  uint64_t buffer_used = 0, frames_discarded = 0;
  // Bytes of the frame stream (tfile frames, as qGdbtrace.frames reads them):
  // more than buffer_used where frames are stored compactly.
  uint64_t stream_bytes = 0;
  uint32_t register_block_size = 0;
  uint32_t stack_bytes = 0; // `monitor gdbtrace stacks`: bytes from $sp per hit, 0 = off
  std::vector<TracepointReport> tracepoints; // definition order
  // Non-empty when no in-kernel collector could be created: why, and what to do.
  std::string fallback;
  // Where the drain runs ("drain: on CPUs 1, off the traced threads' CPUs 0"),
  // from the first run on (DrainPlacement).
  std::string drain;
  StreamReport stream;
  // Frames lost in the collectors' per-CPU rings, by CPU (empty: none knows).
  std::vector<uint64_t> drops_by_cpu;
};

// The qTStatus reply, field for field as gdbserver 13 formats it.
std::string format_qtstatus(const TraceStatus& st);

// The "status ..." line of a tfile header, as gdb's tfile writer formats it.
std::string format_tfile_status(const TraceStatus& st);

// "tnotrun", "tstop", "tfull", ... (the stop reason word gdb uses).
const char* stop_reason_word(const TraceStatus& st);

} // namespace gdbtrace
