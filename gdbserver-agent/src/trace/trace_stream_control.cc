// `monitor gdbtrace stream FILE`: the engine's side of streaming a run to a
// tfile (trace_stream.h writes the file). The stream takes frames from the
// trace buffer after every drain, and before the buffer would discard one it
// has not written yet, so the buffer can keep only the newest frames (it is
// circular while a stream is open) without losing any from the file.
#include <algorithm>
#include <limits>
#include <set>

#include "abi/amd64_regs.h"
#include "common/hex.h"
#include "trace/frame.h"
#include "trace/trace_engine_impl.h"

namespace gdbtrace {

namespace {
// How often a streaming run looks for drops to mark (each look asks every
// location's collector for its counts).
constexpr auto kDropMarkInterval = std::chrono::milliseconds(100);
// The status a streamed file carries until its run ends: what a reader of a
// file whose writer was killed (SIGKILL, a crash) sees in gdb's tstatus.
constexpr const char* kUnfinished =
    "the run had not ended when gdbtrace-server last wrote this streamed file";
} // namespace

// ST as the status line of a file whose run goes on.
static TraceStatus unfinished(TraceStatus st) {
  st.running = false;
  st.ever_ran = true;
  st.reason = TraceStopReason::Error;
  st.stop_text = kUnfinished;
  return st;
}

// The registers every installed tracepoint's frames hold: what its collector
// declared (set_register_availability), all of them for one that declared
// nothing (ptrace). A tracepoint installed later that holds fewer gets zeros
// for the others in the file. No target description to number the others
// after them: the whole block. (A collector's set is what it can read, the
// same for every tracepoint that collects registers, e.g. eBPF's pt_regs and
// fs_base; one that collects none declares none.)
void TraceEngine::Impl::choose_stream_registers() {
  stream_present.clear();
  stream_plans.clear();
  stream_full_plan.reset();
  stream_regblock = register_block_size();
  stream_tdesc =
      hooks.target_description ? hooks.target_description(register_layout(), {}) : std::string();
  if (!hooks.target_description)
    return;
  std::vector<bool> present(num_regs(), true);
  bool cut = false;
  for (const auto& e : tracepoints) {
    auto set = e->installed ? register_sets.find(e->tp.number) : register_sets.end();
    if (set == register_sets.end())
      continue;
    const std::vector<bool>& held = buffer.registers_of(set->second);
    if (std::find(held.begin(), held.end(), true) == held.end())
      continue; // collects no registers: its frames have no register block
    for (uint32_t r = 0; r < present.size(); ++r)
      if (present[r] && (r >= held.size() || !held[r])) {
        present[r] = false;
        cut = true;
      }
  }
  if (!cut || std::find(present.begin(), present.end(), true) == present.end())
    return;
  stream_present = present;
  stream_regblock = 0;
  for (uint32_t r = 0; r < present.size(); ++r)
    if (present[r])
      stream_regblock += gt_reg_size(r);
  stream_tdesc = hooks.target_description(register_layout(), present);
}

TfileContents TraceEngine::Impl::stream_contents(TraceStatus st) const {
  TfileContents c = tfile_contents();
  if (stream && stream->open()) { // begin_stream: every tracepoint
    std::set<Location> kept(stream_locations.begin(), stream_locations.end());
    for (const auto& e : tracepoints)
      if (e->installed)
        kept.insert({e->tp.number, e->tp.address});
    std::erase_if(c.tracepoints, [&](const TfileTracepoint& t) {
      return !kept.count({t.tp->number, t.tp->address});
    });
  }
  c.status = std::move(st);
  c.regblock_size = stream_regblock;
  c.tdesc_xml = stream_tdesc;
  c.tsvs.push_back({kDropMarkerTsv, 0, false, kDropMarkerTsvName});
  return c;
}

Result<void> TraceEngine::Impl::stream_admit(const TracepointEntry& e) {
  if (!running || !stream || !stream->open())
    return ok();
  TfileContents c = stream_contents(unfinished(status()));
  c.tracepoints.push_back({&e.tp, 0, 0});
  std::vector<Tracepoint> bare;
  bare.reserve(c.tracepoints.size());
  for (auto& t : c.tracepoints) { // sources may be left out (stream_write_header)
    t.tp = &bare.emplace_back(*t.tp);
    bare.back().source.clear();
    bare.back().source_types.clear();
  }
  if (stream->header_fits(c))
    return ok();
  std::string msg = "tracepoint " + std::to_string(e.tp.number) + " at 0x" +
                    hex::u64(e.tp.address) + " not installed: the header of the streamed file " +
                    stream->path() +
                    " has no room left for tracepoints defined during the run; `monitor gdbtrace " +
                    "stream NEWFILE` goes on in a new file whose header has them all";
  console("gdbtrace: " + msg + "\n");
  return make_error(ENOSPC, msg);
}

Result<void> TraceEngine::Impl::stream_write_header() {
  if (!stream_header_dirty || !stream || !stream->open())
    return ok();
  stream_header_dirty = false;
  TfileContents c = stream_contents(unfinished(status()));
  Result<void> r = stream->rewrite_header(c);
  std::vector<Tracepoint> bare; // without the sources of those defined during the run
  if (!r && r.error().code == ENOSPC) {
    std::set<Location> in_file(stream_locations.begin(), stream_locations.end());
    bare.reserve(c.tracepoints.size());
    for (auto& t : c.tracepoints)
      if (!in_file.count({t.tp->number, t.tp->address})) {
        t.tp = &bare.emplace_back(*t.tp);
        bare.back().source.clear();
        bare.back().source_types.clear();
      }
    r = stream->rewrite_header(c);
  }
  if (!r)
    return r;
  stream_locations.clear();
  for (const auto& t : c.tracepoints)
    stream_locations.emplace_back(t.tp->number, t.tp->address);
  return ok();
}

Result<void> TraceEngine::Impl::begin_stream() {
  auto next = std::make_unique<TraceStream>(stream_path);
  choose_stream_registers();
  TfileContents c = stream_contents(unfinished(status()));
  if (auto r = next->begin(c); !r)
    return r;
  stream_header_dirty = false;
  stream_locations.clear();
  for (const auto& e : tracepoints)
    stream_locations.emplace_back(e->tp.number, e->tp.address);
  stream = std::move(next);
  streamed_seq = buffer.first_sequence(); // the frames already held go in first
  stream_pending.clear();
  stream_lost = 0;
  stream_marked_drops.clear();
  stream_markers = 0;
  stream_drops_checked = {};
  apply_circular();
  return ok();
}

void TraceEngine::Impl::stream_new_frames() {
  if (!stream || !stream->open())
    return;
  stream_add_pending();                     // the frames append() cut as they came go first
  if (auto r = stream_write_header(); !r) { // no frame of a tracepoint the file does not define
    stream_failed(r.error().message);
    return;
  }
  uint64_t first = buffer.first_sequence();
  if (streamed_seq < first) { // discarded unwritten: stream_before_discard missed them
    stream_lost += first - streamed_seq;
    streamed_seq = first;
  }
  long from = long(streamed_seq - first);
  if (size_t(from) < buffer.frame_count() && !stream_present.empty()) {
    stream_cut_frames(from);
    streamed_seq = first + buffer.frame_count();
  } else if (size_t(from) < buffer.frame_count()) {
    buffer.read_stream(buffer.frame_stream_offset(from), std::numeric_limits<uint64_t>::max(),
                       [&](std::span<const uint8_t> frames) {
                         stream->add(frames);
                         return stream->error().empty();
                       });
    streamed_seq = first + buffer.frame_count();
  }
  stream_mark_drops(false);
  std::string extra = stream_lost ? ";gdbtrace_lost:" + hex::u64(stream_lost) : std::string();
  if (auto r = stream->flush(unfinished(status()), extra); !r)
    stream_failed(r.error().message);
}

void TraceEngine::Impl::stream_cut_frames(long from) {
  for (long n = from; n < long(buffer.frame_count()); ++n)
    if (!stream_cut_one(n))
      return;
  stream_add_pending();
}

// Cuts buffer frame N (to stream_present) into stream_pending, which goes to
// the stream in batches: false once the stream has failed (asked per batch,
// not per frame: error() takes the writer's lock).
bool TraceEngine::Impl::stream_cut_one(long n) {
  constexpr size_t kBatch = 256 << 10; // frames handed to the stream together
  const CompactRegisters* layout = nullptr;
  uint16_t set = 0;
  std::span<const uint8_t> stored = buffer.stored_frame(n, layout, set);
  const CutPlan* plan;
  if (layout) {
    if (set >= stream_plans.size())
      stream_plans.resize(set + 1);
    if (!stream_plans[set])
      stream_plans[set] =
          CutPlan::make(stream_present, layout, register_layout(), register_block_size());
    plan = &*stream_plans[set];
  } else {
    if (!stream_full_plan)
      stream_full_plan =
          CutPlan::make(stream_present, nullptr, register_layout(), register_block_size());
    plan = &*stream_full_plan;
  }
  append_cut_frame(stored, *plan, stream_regblock, stream_pending);
  if (stream_pending.size() < kBatch)
    return true;
  stream_add_pending();
  return stream->error().empty();
}

void TraceEngine::Impl::stream_add_pending() {
  if (stream_pending.empty())
    return;
  stream->add(stream_pending);
  stream_pending.clear();
}

// Frames a collector could not stage (a full per-CPU ring) leave a hole in the
// file; a marker after the frames drained when the drop was seen says where,
// which tracepoint, and how many. The drops happened after the frames that
// were in the rings then, before those drained after: within one drain pass
// (or kDropMarkInterval) of the marker.
void TraceEngine::Impl::stream_mark_drops(bool now) {
  auto t = std::chrono::steady_clock::now();
  if (!stream || !stream->open() || (!now && t - stream_drops_checked < kDropMarkInterval))
    return;
  stream_drops_checked = t;
  stream_add_pending(); // the marker goes after the frames cut so far
  for (const auto& e : tracepoints) {
    if (!e->collector)
      continue;
    uint64_t drops = report_for(*e).drops;
    uint64_t& marked = stream_marked_drops[{e->tp.number, e->tp.address}];
    if (drops <= marked)
      continue;
    FrameBuilder marker(uint16_t(e->tp.number));
    marker.add_tsv(kDropMarkerTsv, int64_t(drops - marked));
    stream->add(marker.finish());
    ++stream_markers;
    marked = drops;
  }
}

void TraceEngine::Impl::stream_failed(const std::string& error) {
  uint64_t frames = stream->frames();
  end_stream("streaming stopped: " + error);
  console("gdbtrace: streaming stopped: " + error + "; " + stream_path + " holds the first " +
          std::to_string(frames) + " frames of the run and ends cleanly. The run goes on in the " +
          "trace buffer" + (circular_requested ? " (circular)" : " (it stops when full)") + ".\n");
}

// The drops of the whole run in the file (gdb's tfile reader skips status
// fields it does not know; `tp V` lines carry each location's hits, which gdb
// shows in `info tracepoints`): hits = frames + drops + hits after the stop.
static std::string loss_fields(const TraceReport& r, uint64_t stream_lost, uint64_t markers) {
  uint64_t hits = 0, drops = 0, after_stop = 0;
  for (const auto& t : r.tracepoints) {
    hits += t.hits;
    drops += t.drops;
    after_stop += t.after_stop;
  }
  std::string out = ";gdbtrace_hits:" + hex::u64(hits) + ";gdbtrace_drops:" + hex::u64(drops) +
                    ";gdbtrace_after_stop:" + hex::u64(after_stop) +
                    ";gdbtrace_lost:" + hex::u64(stream_lost) +
                    ";gdbtrace_drop_markers:" + hex::u64(markers);
  if (std::any_of(r.drops_by_cpu.begin(), r.drops_by_cpu.end(), [](uint64_t n) { return n; })) {
    out += ";gdbtrace_cpu_drops:"; // by CPU number, comma-separated
    for (size_t cpu = 0; cpu < r.drops_by_cpu.size(); ++cpu)
      out += (cpu ? "," : "") + hex::u64(r.drops_by_cpu[cpu]);
  }
  return out;
}

void TraceEngine::Impl::end_stream(const std::string& why) {
  if (!stream || !stream->open())
    return;
  TraceStatus st = status();
  if (!why.empty()) { // the run goes on: the file ends here
    st.running = false;
    st.reason = TraceStopReason::Error;
    st.stop_text = why;
  }
  stream_add_pending();
  stream_header_dirty = false; // finish() writes the header with every tracepoint that fits
  TfileContents c = stream_contents(st);
  stream_mark_drops(true); // the run's last drops, after its last frames
  c.status_extra = loss_fields(make_report(), stream_lost, stream_markers);
  std::string error = stream->error();
  stream_direct = stream->direct(); // finish closes it
  auto r = stream->finish(c);
  apply_circular();
  if (!r && error.empty()) // a new error (an earlier one was already told)
    console("gdbtrace: " + r.error().message + "\n");
}

Result<void> TraceEngine::set_stream(const std::string& path) {
  Impl& m = *impl_;
  if (m.running && m.stream && m.stream->open()) {
    m.drain_all(); // its frames go into the file they were collected for
    m.end_stream(path.empty() ? "streaming stopped by `monitor gdbtrace stream off`"
                              : "streaming moved to " + path);
  }
  if (path.empty()) {
    m.stream_path.clear();
    return ok();
  }
  std::string previous = m.stream_path;
  m.stream_path = path;
  Result<void> r = ok();
  if (m.running) {
    r = m.begin_stream();
    if (r)
      m.stream_new_frames();
  } else {
    // Check now that FILE can be written, not at tstart (which prints nothing);
    // what it holds (a file of an earlier run) stays until then.
    r = TraceStream::check_writable(path);
  }
  if (!r) // during a run the earlier stream has ended: none now
    m.stream_path = m.running ? std::string() : previous;
  return r;
}

void TraceEngine::stream_settle() {
  if (impl_->stream && impl_->stream->open())
    impl_->stream->settle();
}

StreamReport TraceEngine::stream_report() const {
  const Impl& m = *impl_;
  StreamReport s;
  s.path = m.stream_path;
  if (m.stream && (m.stream->open() || m.stream->path() == m.stream_path)) {
    s.path = m.stream->path();
    s.writing = m.stream->open();
    s.frames = m.stream->frames();
    s.bytes = m.stream->file_bytes();
    s.lost = m.stream_lost;
    s.error = m.stream->error();
    s.direct = m.stream->open() ? m.stream->direct() : m.stream_direct;
    s.longest_disk_wait_us = m.stream->longest_disk_wait_us();
    s.longest_write_us = m.stream->longest_write_us();
  }
  return s;
}

} // namespace gdbtrace
