// The typed operations the server calls for the tracepoint packets, following
// gdbserver 13's tracepoint.cc in what each one does (not in how it is spelled:
// parsing and reply formats are server/trace_requests.cc and trace_protocol.cc).
#include <sys/sysinfo.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "abi/amd64_regs.h"
#include "common/hex.h"
#include "trace/collector_probe_site.h"
#include "trace/frame.h"
#include "trace/stack_actions.h"
#include "trace/trace_engine_impl.h"

namespace gdbtrace {

namespace {

Error not_defined(uint32_t number, uint64_t address) {
  return make_error(ENOENT, "tracepoint " + std::to_string(number) + " at 0x" + hex::u64(address) +
                                " is not defined");
}

} // namespace

// ---------------------------------------------------------------- definitions

VerifyEnv TraceEngine::verify_env() const {
  return impl_->verify_env();
}

void TraceEngine::reset() {
  Impl& m = *impl_;
  m.current_frame = -1;
  m.stop_run(TraceStopReason::Requested);
  for (auto& c : m.collectors)
    c->remove_all();
  m.tracepoints.clear();
  m.readonly_regions.clear();
  m.counters.clear();
  m.last_counters = nullptr;
  m.pass_hits.clear();
  m.register_sets.clear();
  std::erase_if(m.tsvs, [](const auto& kv) { return !kv.second.builtin; });
  m.buffer.clear();
}

Result<void> TraceEngine::define_tracepoint(TracepointDefinition def) {
  Impl& m = *impl_;
  Tracepoint& tp = def.tp;
  if (auto* existing = m.find(tp.number, tp.address)) {
    const Tracepoint& old = existing->tp;
    bool same = old.enabled == tp.enabled && old.step_count == tp.step_count &&
                old.pass_count == tp.pass_count && old.fast == tp.fast &&
                old.has_condition == tp.has_condition && old.condition.code == tp.condition.code;
    if (!same) {
      std::string msg = "tracepoint " + std::to_string(tp.number) + " at 0x" +
                        hex::u64(tp.address) +
                        " is already defined differently (QTinit first to redefine)";
      m.console("gdbtrace: " + msg + "\n");
      return make_error(EEXIST, msg);
    }
    // Identical re-definition (gdb re-sends after shared libraries load): accept it
    // and check the action packets that follow against what we have.
    existing->redefining = def.more;
    existing->dedupe_sources = true;
    existing->redefine_stepping = false;
    existing->redefine_action = existing->redefine_step = existing->redefine_source = 0;
    return ok();
  }
  auto entry = std::make_unique<TracepointEntry>();
  entry->tp = std::move(tp);
  entry->complete = !def.more;
  auto* e = m.tracepoints.add(std::move(entry));
  if (m.running && e->complete) {
    if (auto r = m.stream_admit(*e); !r) {
      m.tracepoints.erase(e);
      return r;
    }
    if (auto r = m.install(*e); !r) {
      m.console("gdbtrace: " + r.error().message + "\n");
      m.tracepoints.erase(e);
      return r;
    }
    m.retire_plt_locations(*e);
    m.stream_tracepoints_changed();
    // Its collector may be new to the run's TSV copies (tsv_keepers.cc); one
    // that cannot share them with the others ends the run, saying why.
    if (auto r = m.check_shared_tsvs(); !r) {
      m.console("gdbtrace: " + r.error().message + "\n");
      m.request_stop(TraceStopReason::Error, r.error().message, e->tp.number);
    }
  }
  return ok();
}

Result<void> TraceEngine::add_actions(TracepointActions request) {
  Impl& m = *impl_;
  auto* e = m.find(request.number, request.address);
  if (!e)
    return not_defined(request.number, request.address);
  if (e->redefining)
    return m.check_redefined_actions(*e, request.list);
  if (e->complete)
    return make_error(EINVAL, "tracepoint " + std::to_string(e->tp.number) +
                                  ": actions after the definition was complete");
  if (!request.list) {
    m.console("gdbtrace: " + request.list.error().message + "\n");
    // A half-defined tracepoint would trace the wrong thing: drop it.
    m.drop(e);
    return request.list.error();
  }
  return m.add_actions_to(*e, std::move(*request.list));
}

Result<void> TraceEngine::Impl::add_actions_to(TracepointEntry& e, ActionList list) {
  if (list.starts_stepping)
    e.stepping_seen = true;
  auto& actions = e.stepping_seen ? e.tp.step_actions : e.tp.actions;
  auto& texts = e.stepping_seen ? e.tp.step_action_texts : e.tp.action_texts;
  std::move(list.actions.begin(), list.actions.end(), std::back_inserter(actions));
  std::move(list.texts.begin(), list.texts.end(), std::back_inserter(texts));
  if (list.more)
    return ok();
  e.complete = true;
  if (running) {
    if (auto r = stream_admit(e); !r) {
      drop(&e);
      return r;
    }
    if (auto r = install(e); !r) {
      console("gdbtrace: " + r.error().message + "\n");
      drop(&e);
      return r;
    }
    retire_plt_locations(e);
    stream_tracepoints_changed();
  }
  return ok();
}

// gdb resolves a tracepoint on a function of a library that is not loaded yet
// to the executable's PLT stub of it; once the library is in, gdb re-sends the
// number with the function's own address and forgets the stub location (it
// prefers a function to a trampoline of the same name), but it has no packet
// to remove a location from the target. Every call passes through both
// addresses: collected at both, one call would make two frames. So a new
// location of a number, arriving during a run, disables the number's locations
// that are PLT stubs (when the new one is not a stub itself).
void TraceEngine::Impl::retire_plt_locations(const TracepointEntry& entry) {
  std::optional<bool> new_is_stub;
  for (TracepointEntry* other : tracepoints.with_number(entry.tp.number)) {
    TracepointEntry& o = *other;
    if (&o == &entry || !o.installed || !o.tp.enabled)
      continue;
    if (!is_plt_stub(traced_pid, o.tp.address))
      continue;
    if (!new_is_stub)
      new_is_stub = is_plt_stub(traced_pid, entry.tp.address);
    if (*new_is_stub)
      return;
    if (o.collector)
      if (auto r = o.collector->set_enabled(o.tp.number, o.tp.address, false); !r) {
        console("gdbtrace: tracepoint " + std::to_string(o.tp.number) + " at 0x" +
                hex::u64(o.tp.address) + ": " + r.error().message + "\n");
        continue;
      }
    o.tp.enabled = false;
    console("gdbtrace: tracepoint " + std::to_string(o.tp.number) + " moved from the PLT stub 0x" +
            hex::u64(o.tp.address) + " to 0x" + hex::u64(entry.tp.address) +
            "; the stub no longer collects (one frame per call)\n");
  }
}

// An identical re-definition re-sends its actions: they must match what the
// first definition had, piece by piece.
Result<void> TraceEngine::Impl::check_redefined_actions(TracepointEntry& e,
                                                        const Result<ActionList>& list) {
  if (!list)
    return list.error();
  if (list->starts_stepping)
    e.redefine_stepping = true;
  bool same = true;
  for (const auto& t : list->texts) {
    auto& texts = e.redefine_stepping ? e.tp.step_action_texts : e.tp.action_texts;
    size_t& next = e.redefine_stepping ? e.redefine_step : e.redefine_action;
    same = same && next < texts.size() && texts[next++] == t;
  }
  if (!same) {
    e.redefining = false;
    std::string msg = "tracepoint " + std::to_string(e.tp.number) +
                      " is already defined with different actions (QTinit first to redefine)";
    console("gdbtrace: " + msg + "\n");
    return make_error(EEXIST, msg);
  }
  if (!list->more)
    e.redefining = false;
  return ok();
}

void TraceEngine::Impl::drop(TracepointEntry* e) {
  tracepoints.erase(e);
}

Result<void> TraceEngine::add_source(TracepointSource src) {
  auto* e = impl_->find(src.number, src.address);
  if (!e)
    return not_defined(src.number, src.address);
  // A re-sent identical definition re-sends its source strings too: keep one copy.
  if (e->dedupe_sources && e->redefine_source < e->tp.source.size() &&
      e->tp.source[e->redefine_source] == src.text &&
      e->tp.source_types[e->redefine_source] == src.type) {
    ++e->redefine_source;
    return ok();
  }
  e->tp.source.push_back(std::move(src.text));
  e->tp.source_types.push_back(std::move(src.type));
  impl_->stream_tracepoints_changed();
  return ok();
}

Result<void> TraceEngine::define_tsv(TsvDefinition def) {
  auto& tsv = impl_->tsvs[def.number];
  // Our $trace_timestamp keeps its clock even when gdb downloads it back.
  if (!tsv.builtin) {
    tsv.initial = def.initial;
    tsv.value = def.initial;
  }
  if (!def.name.empty())
    tsv.name = std::move(def.name);
  return ok();
}

void TraceEngine::set_readonly_regions(std::vector<std::pair<uint64_t, uint64_t>> regions) {
  impl_->readonly_regions = std::move(regions);
}

Result<void> TraceEngine::set_tracepoint_enabled(uint32_t number, uint64_t address, bool enable) {
  auto* e = impl_->find(number, address);
  if (!e)
    return not_defined(number, address);
  if (e->tp.enabled == enable)
    return ok();
  if (e->installed && e->collector)
    if (auto r = e->collector->set_enabled(e->tp.number, e->tp.address, enable); !r)
      return r;
  e->tp.enabled = enable;
  impl_->stream_tracepoints_changed();
  return ok();
}

// ---------------------------------------------------------------- run control

Result<void> TraceEngine::start() {
  Impl& m = *impl_;
  if (m.running)
    return make_error(EBUSY, "a trace run is already in progress (tstop first)");
  m.traced_pid = m.hooks.current_pid ? m.hooks.current_pid() : -1;
  if (m.traced_pid <= 0)
    return make_error(ESRCH, "no process to trace (start or attach to one first)");
  // gdb stops sending a tracepoint's actions when it cannot compile one
  // (e.g. "collect main": "don't know symbol class"), leaving the last QTDP
  // promising more. gdbserver runs such a tracepoint with the actions it got;
  // do the same, and say so, rather than refuse the whole run.
  for (auto& e : m.tracepoints)
    if (!e->complete) {
      e->complete = true;
      m.console("gdbtrace: tracepoint " + std::to_string(e->tp.number) +
                ": gdb sent no further actions; collecting the " +
                std::to_string(e->tp.actions.size()) + " it sent\n");
    }
  for (auto& e : m.tracepoints)
    if (auto r = m.check_tsv_references(e->tp); !r) {
      m.console("gdbtrace: " + r.error().message + "\n");
      return r;
    }
  m.counters.clear();
  m.last_counters = nullptr;
  m.pass_hits.clear();
  for (auto& e : m.tracepoints)
    e->earlier = {};
  m.run_layout = m.target.register_layout(m.traced_pid);
  m.run_block_size = m.run_layout->bytes();
  m.buffer.set_register_block_size(m.register_block_size());
  // A streamed run's buffer is circular (set before reserve_for_run, which
  // reserves for it); the file begins once the tracepoints are installed, when
  // it is known which registers their frames hold (choose_stream_registers).
  m.buffer.set_circular(m.circular_requested || !m.stream_path.empty());
  const uint64_t run_first_frame = m.buffer.first_sequence() + m.buffer.frame_count();
  m.buffer.reserve_for_run();
  // Collectors may report frames from install() on: be running while installing.
  m.running = true;
  m.stop_pending = false;
  m.ever_ran = true;
  auto fail = [&m](const Error& e) {
    m.running = false;
    for (auto& c : m.collectors)
      c->remove_all();
    for (auto& t : m.tracepoints)
      t->installed = false;
    m.console("gdbtrace: " + e.message + "\n");
  };
  m.note_tsv_start(); // what each collector's copies start from
  for (auto& c : m.collectors)
    c->begin_install_batch();
  for (auto& e : m.tracepoints) {
    if (auto r = m.install(*e); !r) {
      fail(r.error()); // remove_all also ends the batch
      return r;
    }
  }
  for (auto& c : m.collectors)
    if (auto r = c->end_install_batch(); !r) {
      fail(r.error());
      return r;
    }
  if (auto r = m.check_shared_tsvs(); !r) {
    fail(r.error());
    return r;
  }
  if (!m.stream_path.empty()) {
    if (auto r = m.begin_stream(); !r) {
      fail(r.error());
      m.apply_circular();
      return r;
    }
    m.streamed_seq = run_first_frame; // frames of this run the install produced go in too
  }
  m.stop_reason = TraceStopReason::None;
  m.stop_text.clear();
  m.stop_tp = 0;
  m.start_time = m.trace_timestamp();
  if (std::string why = m.fallback_text(); !why.empty() && !m.tracepoints.empty())
    m.console("gdbtrace: " + why + "\n");
  m.stop_time = 0;
  m.drain_placement.place(m.traced_pid);
  m.arm_drain_timer();
  return ok();
}

void TraceEngine::stop() {
  impl_->stop_run(TraceStopReason::Requested);
}

bool TraceEngine::running() const {
  return impl_->running;
}

void TraceEngine::set_disconnected_tracing(bool on) {
  impl_->disconnected_tracing = on;
}

void TraceEngine::set_circular(bool on) {
  impl_->circular_requested = on;
  impl_->apply_circular();
}

// The largest trace buffer we accept: half of this machine's memory. The
// buffer is reserved whole at QTStart, and a run that fills a larger one
// would push the stub (and the traced program) into swap or the OOM killer.
static uint64_t max_buffer_size() {
  struct sysinfo info {};
  if (sysinfo(&info) != 0)
    return uint64_t{1} << 32;
  return static_cast<uint64_t>(info.totalram) * info.mem_unit / 2;
}

Result<void> TraceEngine::set_buffer_size(std::optional<uint64_t> size) {
  if (impl_->running)
    return make_error(EBUSY, "cannot change the trace buffer size during a run");
  uint64_t want = size.value_or(TraceBuffer::kDefaultSize);
  uint64_t limit = impl_->buffer_limit ? impl_->buffer_limit : max_buffer_size();
  if (want > limit) {
    impl_->console("gdbtrace: a trace buffer of " + std::to_string(want) +
                   " bytes is more than half of this machine's memory; using " +
                   std::to_string(limit) + " bytes\n");
    want = limit;
  }
  impl_->current_frame = -1;
  impl_->buffer.set_capacity(static_cast<size_t>(want));
  return ok();
}

void TraceEngine::set_buffer_limit(uint64_t bytes) {
  impl_->buffer_limit = bytes;
}

void TraceEngine::set_notes(const TraceNotes& n) {
  if (n.user)
    impl_->user = *n.user;
  if (n.notes)
    impl_->notes = *n.notes;
  if (n.tstop)
    impl_->stop_note = *n.tstop;
}

Result<void> TraceEngine::set_stack_bytes(uint32_t bytes) {
  if (bytes) {
    auto checked = check_stack_bytes(bytes);
    if (!checked)
      return checked.error();
  }
  impl_->stack_bytes = bytes;
  return ok();
}

uint32_t TraceEngine::stack_bytes() const {
  return impl_->stack_bytes;
}

Pid TraceEngine::traced_pid() const {
  return impl_->traced_pid;
}

// ---------------------------------------------------------------- reading back

// Counts are kept per location: gdb's `info tracepoints` sums qTP over a
// number's locations, and the status views show each location's own.
TracepointReport TraceEngine::Impl::report_for(const TracepointEntry& e) const {
  TracepointReport r;
  r.number = e.tp.number;
  r.address = e.tp.address;
  r.enabled = e.tp.enabled;
  r.fast = e.tp.fast;
  r.backend = e.collector ? e.collector->name() : "";
  r.note = e.collector_note;
  if (auto it = counters.find({e.tp.number, e.tp.address}); it != counters.end()) {
    r.frames = it->second.frames;
    r.bytes = it->second.bytes;
    r.drops = it->second.buffer_drops;
    r.errors = it->second.malformed;
  }
  if (e.collector) {
    CollectorStats cs = e.earlier;
    cs += e.collector->stats(e.tp.number, e.tp.address);
    r.hits = cs.hits;
    r.emulated = cs.emulated;
    r.drops += cs.drops;
    r.errors += cs.errors;
    r.after_stop = cs.after_stop;
  }
  return r;
}

TraceReport TraceEngine::Impl::make_report() const {
  TraceReport r;
  r.status = status();
  r.buffer_used = buffer.used();
  r.stream_bytes = buffer.stream_size();
  r.frames_discarded = buffer.frames_discarded();
  r.register_block_size = register_block_size();
  r.stack_bytes = stack_bytes;
  r.fallback = fallback_text();
  r.drain = drain_placement.where();
  r.tracepoints.reserve(tracepoints.size()); // 10 000 of them: no doubling at the stub's peak
  for (const auto& e : tracepoints)
    r.tracepoints.push_back(report_for(*e));
  for (const auto& c : collectors) {
    std::vector<uint64_t> drops = c->drops_by_cpu();
    if (r.drops_by_cpu.size() < drops.size())
      r.drops_by_cpu.resize(drops.size());
    for (size_t cpu = 0; cpu < drops.size(); ++cpu)
      r.drops_by_cpu[cpu] += drops[cpu];
  }
  return r;
}

TraceReport TraceEngine::report() {
  impl_->drain_all();
  impl_->apply_pending_stop(); // a drain that filled the buffer ends the run now
  TraceReport r = impl_->make_report();
  r.stream = stream_report();
  return r;
}

Result<TracepointCounts> TraceEngine::tracepoint_counts(uint32_t number, uint64_t address) {
  auto* e = impl_->find(number, address);
  if (!e)
    return not_defined(number, address);
  impl_->drain_for_counts(); // its bytes count frames the engine holds
  auto r = impl_->report_for(*e);
  return TracepointCounts{r.hits, r.bytes};
}

std::optional<int64_t> TraceEngine::tsv_value(uint32_t number) {
  Impl& m = *impl_;
  if (m.current_frame >= 0) {
    std::optional<int64_t> v;
    std::vector<uint8_t> scratch;
    FrameView(m.buffer.frame(m.current_frame, scratch), m.register_block_size())
        .for_each([&](const FrameBlock& b) {
          if (b.type == GT_TFRAME_TSV && b.tsv == number)
            v = b.value; // the last one wins, as gdbserver
          return true;
        });
    return v;
  }
  // Before the first run a variable has no value yet.
  if (!m.running && !m.ever_ran)
    return std::nullopt;
  if (!m.tsvs.count(number))
    return std::nullopt;
  m.drain_for_counts(); // a collector may count adds from the frames it drains
  return m.kept_tsv_value(number);
}

std::vector<Tracepoint> TraceEngine::tracepoints() const {
  std::vector<Tracepoint> out;
  for (const auto& e : impl_->tracepoints)
    out.push_back(e->tp);
  return out;
}

std::vector<TsvDefinition> TraceEngine::Impl::tsv_definitions() const {
  std::vector<TsvDefinition> out;
  for (const auto& [num, tsv] : tsvs)
    out.push_back({num, tsv.initial, tsv.builtin, tsv.name});
  return out;
}

std::vector<TsvDefinition> TraceEngine::tsvs() const {
  return impl_->tsv_definitions();
}

uint64_t TraceEngine::frame_stream_size() {
  impl_->drain_all();
  return impl_->buffer.stream_size();
}

void TraceEngine::read_frame_stream(uint64_t offset, uint64_t length,
                                    const TraceBuffer::Sink& sink) const {
  impl_->buffer.read_stream(offset, length, sink);
}

uint64_t TraceEngine::frame_count() {
  impl_->drain_all();
  return impl_->buffer.frame_count();
}

std::span<const uint8_t> TraceEngine::stream_frame(uint64_t n,
                                                   std::vector<uint8_t>& scratch) const {
  return n < impl_->buffer.frame_count() ? impl_->buffer.frame(long(n), scratch)
                                         : std::span<const uint8_t>{};
}

// ---------------------------------------------------------------- frame selection

std::optional<FrameHit> TraceEngine::select_frame(const FrameQuery& q) {
  Impl& m = *impl_;
  long found = -1;
  switch (q.kind) {
  case FrameQuery::None:
    m.current_frame = -1;
    return std::nullopt;
  case FrameQuery::Number:
    found = q.a < m.buffer.frame_count() ? long(q.a) : -1;
    break;
  case FrameQuery::Pc:
    found = m.buffer.find_pc(q.a, m.current_frame);
    break;
  case FrameQuery::InRange:
  case FrameQuery::OutsideRange:
    found = m.buffer.find_range(q.a, q.b, q.kind == FrameQuery::InRange, m.current_frame);
    break;
  case FrameQuery::Tracepoint:
    found = q.a > 0xffff ? -1 : m.buffer.find_tracepoint(uint16_t(q.a), m.current_frame);
    break;
  }
  if (found < 0)
    return std::nullopt;
  m.current_frame = found;
  return FrameHit{uint64_t(found), m.buffer.frame_tp(found)};
}

// ---------------------------------------------------------------- collectors

std::vector<CollectorInfo> TraceEngine::collectors() const {
  std::vector<CollectorInfo> out;
  for (const auto& c : impl_->collectors)
    out.push_back({c->name(), c->describe()});
  return out;
}

const std::string& TraceEngine::preferred_backend() const {
  return impl_->preferred_backend;
}

Result<void> TraceEngine::prefer_backend(std::string_view name) {
  if (name.empty() || name == "auto") {
    impl_->preferred_backend.clear();
    return ok();
  }
  for (const auto& c : impl_->collectors)
    if (c->name() == name) {
      impl_->preferred_backend = std::string(name);
      return ok();
    }
  return make_error(ENOENT, "no backend '" + std::string(name) + "'");
}

} // namespace gdbtrace
