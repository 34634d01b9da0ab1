// Private state of the TraceEngine (trace_engine.cc: run control and the
// TraceContext; trace_operations.cc: the typed operations the server calls).
#pragma once

#include <algorithm>
#include <asio.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "trace/drain_placement.h"
#include "trace/hit_order.h"
#include "trace/stream_frames.h"
#include "trace/tfile_writer.h"
#include "trace/trace_buffer.h"
#include "trace/trace_engine.h"
#include "trace/trace_status.h"
#include "trace/trace_stream.h"
#include "trace/tracepoint_parser.h"
#include "trace/tracepoint_table.h"

namespace gdbtrace {

struct TracepointEntry {
  Tracepoint tp;
  bool stepping_seen = false; // parser state: an 'S' packet arrived
  bool complete = false;      // the last QTDP packet (no trailing '-') arrived
  Collector* collector = nullptr;
  bool installed = false;
  // The program's bytes at tp.address before an in-kernel collector's uprobe
  // went in (the kernel writes an int3 there, or on a 5-byte nop a call into
  // its trampoline): memory reads show these instead, as gdbserver hides its
  // own breakpoints. Empty for the ptrace collector (the target hides those).
  std::vector<uint8_t> original_text;
  // Counts of the collector that served this tracepoint earlier in the run
  // (TraceEngine::move_to_trap_collector); report_for adds them.
  CollectorStats earlier;
  // Why this tracepoint is not with the collector it would have had (gdb's
  // breakpoint at its address); shown by `monitor gdbtrace status`.
  std::string collector_note;
  // gdb re-sends an identical definition (e.g. after shared libraries load):
  // the following packets are compared with what we have instead of appended.
  bool redefining = false;
  bool redefine_stepping = false;
  bool dedupe_sources = false; // QTDPsrc after a re-definition: skip copies we hold
  size_t redefine_action = 0, redefine_step = 0, redefine_source = 0;
};

struct TsvEntry {
  int64_t initial = 0;
  int64_t value = 0;
  std::string name;
  bool builtin = false; // $trace_timestamp: value comes from the clock
};

// A tracepoint location: gdb defines one number at N addresses (one QTDP each).
using Location = std::pair<uint32_t, uint64_t>; // number, address

// What the engine itself counts per tracepoint location. Hits, probe-side
// drops, hits after the stop and errors belong to the collector
// (Collector::stats); see TracepointReport.
struct EngineCounters {
  uint64_t frames = 0, bytes = 0; // accepted into the trace buffer
  uint64_t buffer_drops = 0;      // refused by a full, non-circular buffer
  uint64_t malformed = 0;         // refused: blocks do not parse (a collector's bug)
};

struct TraceEngine::Impl : TraceContext {
  Impl(asio::io_context& io, NativeTarget& target, Hooks hooks);

  // --- TraceContext (collectors call these) ---
  bool append_frame(std::span<const uint8_t> frame, uint64_t address) override;
  bool append_compact_frame(std::span<const uint8_t> frame, const RegisterMask& registers,
                            uint64_t address) override;
  // COMPACT: FRAME's register blocks are compact blocks of these registers.
  bool append(std::span<const uint8_t> frame, const RegisterMask* compact, uint64_t address);
  void next_hit_time(uint64_t monotonic_ns) override { next_hit_ns = monotonic_ns; }
  uint32_t register_block_size() const override;
  RegisterLayout register_layout() const override;
  size_t buffer_capacity() const override { return buffer.capacity(); }
  // A streamed or circular run drains for as long as it runs: rings sized
  // from the buffer alone overflow whenever the stub waits for a CPU.
  size_t staging_capacity() const override {
    return unbounded_run() ? std::max(buffer.capacity(), kStreamStagingBytes) : buffer.capacity();
  }
  bool unbounded_run() const override { return !stream_path.empty() || circular_requested; }
  void set_register_availability(uint32_t tp_number, const std::vector<bool>& valid) override;
  std::optional<int64_t> get_tsv(uint32_t number) override;
  void set_tsv(uint32_t number, int64_t value) override;
  std::optional<int64_t> tsv_seed(uint32_t number) override;
  int64_t trace_timestamp() override;
  void record_hit(uint32_t tp_number) override;
  void while_stepping_done(uint32_t tp_number) override;
  bool collecting() const override { return running && !stop_pending; }
  void request_stop(TraceStopReason reason, std::string error_text, uint32_t tp_number) override;
  void console(const std::string& text) override;
  std::optional<Tracepoint> definition(uint32_t tp_number, uint64_t address) const override;

  // --- operations (trace_operations.cc) ---
  Result<void> add_actions_to(TracepointEntry& e, ActionList list);
  Result<void> check_redefined_actions(TracepointEntry& e, const Result<ActionList>& list);
  void drop(TracepointEntry* e);
  TracepointReport report_for(const TracepointEntry& e) const;
  TraceReport make_report() const;

  // --- run control ---
  // Offers ENTRY to each collector in turn, except those with any of the
  // capability bits in EXCLUDE.
  Result<void> install(TracepointEntry& entry, unsigned exclude = 0);
  Result<void> move_to_trap_collector(uint64_t address);
  // Whether TP reads or writes a trace state variable other than the builtin clock.
  bool uses_kept_tsvs(const Tracepoint& tp) const;
  // After ENTRY was installed during a run: gdb moved its number from a PLT stub
  // to the function itself, so the stub location stops collecting (once per call).
  void retire_plt_locations(const TracepointEntry& entry);
  std::vector<bool> registers_in_every_frame() const;
  // The numbers a saved trace file gives the further locations of numbers with several (save()).
  std::map<Location, uint16_t> file_numbers() const;
  // What install() saves in entry.original_text before a uprobe goes in.
  std::vector<uint8_t> text_under_probe(const TracepointEntry& entry);
  // The same before a collector that patches code (the jump pad) writes its jmp.
  std::vector<uint8_t> text_under_jump(const TracepointEntry& entry);
  // An installed tracepoint at ADDRESS other than EXCEPT, or null.
  const TracepointEntry* installed_at(uint64_t address, const TracepointEntry* except) const;
  void stop_run(TraceStopReason reason, std::string text = {}, uint32_t tp = 0);
  void apply_pending_stop();
  void arm_drain_timer();
  void drain_all();
  // Whether this run's tracepoints are on two or more collectors that stamp
  // their hits (drain_all then stores their frames in hit order: HitOrder).
  bool several_stamping_collectors() const;
  // drain_all, unless the traced process has not run since the last drain
  // made while it was stopped: then the rings hold nothing new.
  void drain_for_counts();
  // gdb downloads TSVs after tracepoints: their numbers are checked at QTStart
  // (and at once for tracepoints defined during a run).
  VerifyEnv verify_env() const;
  Result<void> check_tsv_references(const Tracepoint& tp) const;
  uint32_t num_regs() const;
  TraceStatus status() const;
  TracepointEntry* find(uint32_t number, uint64_t address);
  TracepointEntry* first_with_number(uint32_t number);
  const TracepointEntry* first_with_number(uint32_t number) const;
  TfileContents tfile_contents() const;

  // --- streaming (trace_stream_control.cc) ---
  // Opens the stream file for this run and writes its header.
  Result<void> begin_stream();
  // Appends the frames drained since the last call and rewrites the file's status.
  void stream_new_frames();
  // Before the buffer discards frames to store one of BYTES: writes those
  // not yet in the file first.
  void stream_before_discard(size_t bytes) {
    if (stream && stream->open() &&
        buffer.free_bytes() + buffer.stored_before(long(streamed_seq - buffer.first_sequence())) <
            bytes)
      stream_new_frames();
  }
  // The header of the stream file with status ST: the tracepoints it
  // defines (stream_locations) and the installed ones defined since.
  TfileContents stream_contents(TraceStatus st) const;
  // A tracepoint defined during a streamed run is installed only when the
  // file's header has room for it: else an error gdb shows.
  Result<void> stream_admit(const TracepointEntry& e);
  // The header rewritten with the tracepoints defined since it was last
  // written (stream_header_dirty); before any frame of theirs is.
  Result<void> stream_write_header();
  void stream_tracepoints_changed() {
    if (running && stream && stream->open())
      stream_header_dirty = true;
  }
  // Which registers the file's blocks hold: those of every installed tracepoint.
  void choose_stream_registers();
  // Appends buffer frames FROM.. to the file, cut to stream_present.
  void stream_cut_frames(long from);
  bool stream_cut_one(long n);
  void stream_add_pending();
  // The frame just stored is the next one the file needs, and the file's
  // header defines its tracepoint: it can be cut at once (append()), while
  // its bytes are in the cache, instead of read back at the drain's end.
  bool stream_takes_next_frame() const {
    return stream && stream->open() && !stream_present.empty() && !stream_header_dirty &&
           streamed_seq + 1 == buffer.first_sequence() + buffer.frame_count();
  }
  // After a drain's frames: a loss marker per location whose collector dropped
  // frames since the last marker (at most every kDropMarkInterval, and at the end).
  void stream_mark_drops(bool now);
  // Ends the file (end marker, final header); WHY: the status line's reason
  // when the run goes on without the stream, "" when the run has stopped.
  void end_stream(const std::string& why);
  // Counts a loss that only the file shows (status_extra) and tells the console.
  void stream_failed(const std::string& error);
  // The buffer discards frames when gdb asked for a circular buffer or a stream takes them.
  void apply_circular() { buffer.set_circular(circular_requested || (stream && stream->open())); }
  std::vector<TsvDefinition> tsv_definitions() const;

  asio::io_context& io;
  NativeTarget& target;
  Hooks hooks;
  asio::steady_timer drain_timer;
  int drain_ticks = 0;
  std::vector<std::unique_ptr<Collector>> collectors;
  uint64_t next_hit_ns = 0; // next_hit_time(), for the next append
  bool hold_frames = false; // in drain_all, with several stamping collectors
  HitOrder held;
  std::string preferred_backend;                                           // "" = auto
  std::vector<std::pair<std::string, std::string>> unavailable_collectors; // name, why
  // Why tracepoints go to ptrace and what to do about it; "" when an in-kernel collector exists.
  std::string fallback_text() const;

  TracepointTable<TracepointEntry> tracepoints; // definition order, indexed
  std::map<uint32_t, TsvEntry> tsvs;
  // The run's TSV copies (tsv_keepers.cc): every collector with a tracepoint
  // installed keeps its own, from the engine's values at the start.
  std::map<uint32_t, int64_t> tsv_start;
  std::vector<Collector*> tsv_keepers;
  void note_tsv_start();
  Result<void> check_shared_tsvs();
  std::optional<int64_t> kept_tsv_value(uint32_t number);
  std::string shared_tsv_conflict(const TracepointEntry& entry) const;
  std::unordered_map<Location, EngineCounters, LocationHash> counters; // per frame: hashed
  // The last frame's counters (a busy location's frames come in long runs):
  // nodes stay put until counters.clear(), which resets this.
  EngineCounters* last_counters = nullptr;
  Location last_counters_at{};
  // record_hit() calls this run, per number: a pass count is the tracepoint's,
  // over all its locations.
  std::unordered_map<uint32_t, uint64_t> pass_hits;
  // The registers each number's collector fills in its tfile frames
  // (set_register_availability), as the buffer's register set.
  std::map<uint32_t, uint16_t> register_sets;
  std::vector<std::pair<uint64_t, uint64_t>> readonly_regions; // [start, end] inclusive
  TraceBuffer buffer;
  bool circular_requested = false; // gdb's `set circular-trace-buffer`
  std::string stream_path;         // `monitor gdbtrace stream`; "" = off
  // The run's stream (kept after it ends, for its counts); null before any.
  std::unique_ptr<TraceStream> stream;
  uint64_t streamed_seq = 0;  // buffer frames (by sequence number) before this are in the file
  uint64_t stream_lost = 0;   // discarded before they were written (should stay 0)
  bool stream_direct = false; // the ended stream's frames were written directly
  std::vector<Location> stream_locations; // the tracepoints the file's header defines
  bool stream_header_dirty = false;       // tracepoints defined or changed since
  // Drops of each location the file's markers account for, markers written,
  // and when the drops were last looked at (stream_mark_drops).
  std::unordered_map<Location, uint64_t, LocationHash> stream_marked_drops;
  uint64_t stream_markers = 0;
  std::chrono::steady_clock::time_point stream_drops_checked{};
  // The registers the file's blocks hold (stream_frames.h); empty: frames are
  // written as the buffer expands them. With the description and block size
  // of the header, the same at its start and its end.
  std::vector<bool> stream_present;
  uint32_t stream_regblock = 0;
  std::string stream_tdesc;
  std::vector<std::optional<CutPlan>> stream_plans; // by register set, for compact frames
  std::optional<CutPlan> stream_full_plan;          // for frames with 'R' blocks
  std::vector<uint8_t> stream_pending;              // frames cut, not yet handed to the stream
  // The target's stopped_epoch at the last drain_for_counts, when it had one.
  std::optional<uint64_t> drained_stopped_epoch;
  long current_frame = -1;

  bool running = false;
  bool ever_ran = false;
  bool stop_pending = false;
  // What request_stop() asked for, applied on the event loop or, sooner, when
  // gdb asks for the status (it must not read "running" after tfull).
  TraceStopReason pending_reason = TraceStopReason::None;
  std::string pending_text;
  uint32_t pending_tp = 0;
  Pid traced_pid = -1;
  // The drain off the traced threads' CPUs where there is a spare one (at
  // tstart and each heartbeat; undone at the run's end).
  DrainPlacement drain_placement;
  // The traced process's register layout, from QTStart on (register_layout()).
  std::optional<RegisterLayout> run_layout;
  // Its block size, kept: RegisterLayout::bytes() sums every register's size,
  // and each drained frame asks for it (18 % of the stub's CPU when streaming).
  uint32_t run_block_size = 0;
  TraceStopReason stop_reason = TraceStopReason::None;
  std::string stop_text;
  uint32_t stop_tp = 0;
  bool disconnected_tracing = false;
  uint32_t stack_bytes = 0;  // `monitor gdbtrace stacks`: 0 = off
  uint64_t buffer_limit = 0; // set_buffer_limit: 0 = half of this machine's memory
  int64_t start_time = 0, stop_time = 0;
  std::string user, notes, stop_note;
};

} // namespace gdbtrace
