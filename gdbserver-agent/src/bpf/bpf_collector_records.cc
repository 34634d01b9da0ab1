// The eBPF collector's records and counts: draining the per-CPU rings into the
// trace, drops, per-probe statistics, TSV values, and taking probes away.
#include "bpf/bpf_collector_impl.h"
#include "trace/drain_placement.h"

namespace gdbtrace::bpf_collector_internal {

Probe* BpfCollector::find_slot(uint32_t slot) {
  uint32_t i = index_.at_slot(slot);
  return i == ProbeIndex::kNoProbe ? nullptr : &probes_[i];
}

ProbeKeys BpfCollector::keys_of(const Probe& p) {
  return {p.slot, p.tp, p.address, p.pid, p.pass_count};
}

void BpfCollector::reindex() {
  index_.clear();
  for (const auto& p : probes_)
    index_.add(keys_of(p));
}

void BpfCollector::remove_probe(size_t i) {
  if (i != probes_.size() - 1)
    std::swap(probes_[i], probes_.back());
  probes_.pop_back(); // closing its link removes the uprobe from the tracee
  index_.remove(i);
}

Result<void> BpfCollector::set_enabled(uint32_t tp_number, uint64_t address, bool enabled) {
  bool found = false;
  for (auto& p : probes_) {
    if (p.tp != tp_number || (address && p.address != address))
      continue;
    __atomic_store_n(&control(p.slot).enabled, enabled ? 1 : 0, __ATOMIC_RELEASE);
    found = true;
  }
  if (!found)
    return make_error(ENOENT, "tracepoint " + std::to_string(tp_number) +
                                  " is not installed in the eBPF collector");
  return ok();
}

void BpfCollector::remove_all() {
  batch_ = false;
  batch_files_.clear();
  if (!run_active_)
    return;
  // Frames already in the ring belong to this run: hand them over first.
  if (!draining_)
    drain();
  for (const auto& [number, index] : tsv_slots_)
    retired_tsvs_[number] = __atomic_load_n(tsv_cell(index), __ATOMIC_RELAXED);
  // Closing the links (perf events) removes the uprobes from the tracee and,
  // with the links, the programs; concurrently, as each close waits for a grace period.
  std::vector<UniqueFd> events;
  for (auto& p : probes_)
    events.push_back(std::move(p.event));
  bpf::close_concurrently(std::move(events));
  // No program runs any more: what the rings hold now are hits made while the
  // engine was stopping the run (they count as hits after the stop).
  if (!draining_ && rings_) {
    draining_ = true;
    rings_.drain([this](std::span<const uint8_t> r, uint64_t stamp) { handle_record(r, stamp); });
    draining_ = false;
  }
  retire_stats();
  probes_.clear();
  index_.clear();
  shared_programs_.clear();
  run_active_ = false;
  // Whatever is left is stale.
  discard_ = true;
  if (!draining_ && rings_)
    rings_.discard();
}

// The run's counts, per location, for the status after the probes are gone.
void BpfCollector::retire_stats() {
  retired_stats_ = replaced_stats_;
  retired_cpu_drops_.clear();
  for (const auto& p : probes_) {
    retired_stats_[{p.tp, p.address}] += probe_stats(p);
    add_cpu_drops(p.slot, retired_cpu_drops_);
  }
}

void BpfCollector::add_cpu_drops(uint32_t slot, std::vector<uint64_t>& out) const {
  int ncpu = libbpf_num_possible_cpus();
  std::vector<StatsSlot> per_cpu(size_t(ncpu > 0 ? ncpu : 1));
  if (bpf_map_lookup_elem(stats_.get(), &slot, per_cpu.data()) != 0)
    return;
  if (out.size() < per_cpu.size())
    out.resize(per_cpu.size());
  for (size_t cpu = 0; cpu < per_cpu.size(); ++cpu)
    out[cpu] += per_cpu[cpu].drops;
}

// A ring per CPU: a drop is counted on the CPU whose ring was full. One map
// lookup per probe: for `monitor gdbtrace status` and the end of a stream, not per frame.
std::vector<uint64_t> BpfCollector::drops_by_cpu() const {
  if (!run_active_)
    return retired_cpu_drops_;
  std::vector<uint64_t> out;
  for (const auto& p : probes_)
    add_cpu_drops(p.slot, out);
  return out;
}

void BpfCollector::arm_watch() {
  if (!watch_ || watching_)
    return;
  watching_ = true;
  watch_->async_wait(asio::posix::stream_descriptor::wait_read,
                     [this, alive = alive_](const std::error_code& ec) {
                       if (!*alive)
                         return;
                       watching_ = false;
                       if (ec)
                         return;
                       rings_.take_wakeups();
                       if (update_deferral() && !past_mark())
                         deferred_wakes_++; // a first ring's mark: the frames wait
                       else
                         drain();
                       if (run_active_) {
                         arm_watch();
                         drain_past_mark();
                       }
                     });
}

// Deferral (bpf_layout.h kDeferWakeOffset). On a machine with no idle CPU, a
// drain takes its CPU from a traced thread: two threads on two CPUs, drained at
// each 4 MB first ring's mark, scaled 1.43-1.70x where the same run with rings
// that held it scaled 1.89-2.0x (docs/benchmarks.md). A linear run ends when
// its buffer is full, so its frames can wait in the rings: a wake on such a
// machine leaves them there and tells the programs to stop waking the stub
// until an overflow ring is half full, when it must drain. Every drain looks
// again (the heartbeat's too), so hot-ring wakes come back when a CPU is idle.
// A stream or a circular buffer drains for as long as it runs: no deferral.
bool BpfCollector::update_deferral() {
  bool defer = run_active_ && rings_.overflow_bytes() > 0 && ctx_ && !ctx_->unbounded_run() &&
               !idle_cpu_for_drain();
  if (defer != deferring_) {
    deferring_ = defer;
    auto* flag = reinterpret_cast<uint64_t*>(static_cast<uint8_t*>(control_mem_.get()) +
                                             bpf::kDeferWakeOffset);
    __atomic_store_n(flag, defer ? 1 : 0, __ATOMIC_RELEASE);
  }
  return defer;
}

// Whether the rings hold what the programs wake the stub for.
bool BpfCollector::past_mark() const {
  if (deferring_)
    return rings_.any_holds(UINT64_MAX, rings_.overflow_bytes() / 2);
  return rings_.any_holds(rings_.ring_bytes() / 2);
}

// Only the frame that takes a ring past half full wakes the stub, and a wake
// that comes while this handler drains is lost (asio waits for the next edge,
// and none comes until the stub drains below the mark): the ring would fill
// and drop hits until the engine's one-second drain. So after re-arming, a
// ring still past the mark is drained again, through the io_context, so gdb's
// packets interleave. (Not the cause of the stream runs' losses: docs/benchmarks.md.)
// A drain that took nothing stopped at a record still being written: its
// thread was preempted inside the program, where it cannot migrate. Draining
// again at once spun, at real-time priority (drain_placement.h), on the CPU
// that thread needs; it is tried again a millisecond later.
void BpfCollector::drain_past_mark() {
  if (!watch_ || !past_mark())
    return;
  auto again = [this, alive = alive_] {
    if (!*alive || !run_active_)
      return;
    drain();
    drain_past_mark();
  };
  if (last_drained_ > 0) {
    asio::post(watch_->get_executor(), again);
    return;
  }
  if (!retry_)
    retry_ = std::make_unique<asio::steady_timer>(io_);
  retry_->expires_after(std::chrono::milliseconds(1));
  retry_->async_wait([again](const std::error_code& ec) {
    if (!ec)
      again();
  });
}

void BpfCollector::handle_record(std::span<const uint8_t> record, uint64_t stamp) {
  if (discard_ || !ctx_ || record.size() < bpf::kRecordSlot)
    return;
  uint64_t slot = 0;
  memcpy(&slot, record.data(), sizeof slot);
  record = record.subspan(bpf::kRecordSlot);
  const uint8_t* data = record.data();
  size_t size = record.size();
  FrameView frame(record, ctx_->register_block_size());
  if (!frame.has_header())
    return;
  if (frame.tp_number() == bpf::kErrorMarker && size >= sizeof(bpf::ErrorRecord)) {
    bpf::ErrorRecord e;
    memcpy(&e, data, sizeof e);
    ctx_->request_stop(TraceStopReason::Error,
                       "tracepoint " + std::to_string(e.tp_number) + ": " + ax_strerror(e.status) +
                           " at bytecode offset " + std::to_string(e.pc) +
                           (e.in_condition ? " of its condition" : " of an action") +
                           " (eBPF collector)",
                       e.tp_number);
    return;
  }
  if (frame.total_size() > size)
    return; // cannot happen: the program bounds the size
  Probe* p = find_slot(slot);
  if (!p)
    return; // a probe already removed (uninstall) or of an earlier run
  if (!ctx_->collecting()) {
    // e.g. after the frame that filled the buffer or reached the pass count
    replaced_stats_[{p->tp, p->address}].after_stop++;
    return;
  }
  // The trace buffer stores it as it is (a record that does not parse is counted malformed).
  ctx_->next_hit_time(stamp); // bpf_ktime_get_ns: CLOCK_MONOTONIC
  ctx_->append_compact_frame({data, frame.total_size()}, p->registers, p->address);
  if (p->pass_count)         // the engine counts hits for pass counts only: no lookup per frame
    ctx_->record_hit(p->tp); // may request a stop
}

void BpfCollector::drain() {
  if (!rings_ || draining_)
    return;
  draining_ = true;
  last_drained_ =
      rings_.drain([this](std::span<const uint8_t> r, uint64_t stamp) { handle_record(r, stamp); });
  if (run_active_) {
    account_drops();
    update_deferral();
  }
  draining_ = false;
  if (!run_active_) {
    discard_ = true;
    rings_.discard();
  }
}

// Hits whose frame the full ring buffer dropped still count toward pass counts.
void BpfCollector::account_drops() {
  // Only when a frame was dropped since the last look, and only for the
  // probes with a pass count (the engine's hit count feeds nothing else; the
  // status reads drops from the maps): with thousands of probes, a walk over
  // all of them after every drain that saw a drop made a drain that fell
  // behind slower still.
  uint64_t total = __atomic_load_n(&control(bpf::kGlobalSlot).hits, __ATOMIC_ACQUIRE);
  if (total == drops_seen_)
    return;
  drops_seen_ = total;
  const auto& counted = index_.pass_counted();
  for (size_t k = 0; k < counted.size() && run_active_; k++) {
    size_t i = counted[k];
    uint64_t drops = __atomic_load_n(&control(probes_[i].slot).drops, __ATOMIC_ACQUIRE);
    uint32_t tp = probes_[i].tp;
    while (run_active_ && ctx_->collecting() && i < probes_.size() &&
           probes_[i].drops_reported < drops) {
      probes_[i].drops_reported++;
      ctx_->record_hit(tp);
    }
  }
}

StatsSlot BpfCollector::read_stats(uint32_t slot) const {
  int ncpu = libbpf_num_possible_cpus();
  std::vector<StatsSlot> per_cpu(size_t(ncpu > 0 ? ncpu : 1));
  StatsSlot sum{};
  if (bpf_map_lookup_elem(stats_.get(), &slot, per_cpu.data()) != 0)
    return sum;
  for (const auto& s : per_cpu) {
    sum.hits += s.hits;
    sum.drops += s.drops;
    sum.errors += s.errors;
    sum.emulated += s.emulated;
  }
  return sum;
}

Result<CollectorStats> BpfCollector::uninstall(uint32_t tp_number, uint64_t address) {
  if (!draining_)
    drain(); // its frames so far, and its drops counted toward the pass count
  CollectorStats removed;
  bool found = false;
  // O(log n) each (bpf_probe_index.h): removing thousands during a run stays linear.
  for (auto at = index_.at_location(tp_number, address); !at.empty();
       at = index_.at_location(tp_number, address)) {
    size_t i = at.front();
    Probe& p = probes_[i];
    __atomic_store_n(&control(p.slot).enabled, 0, __ATOMIC_RELEASE);
    removed += probe_stats(p);
    found = true;
    Pid pid = p.pid;
    remove_probe(i);
    set_emulating_at(pid, address); // the probe that emulated the instruction may be gone
  }
  if (!found)
    return make_error(ENOENT,
                      "tracepoint " + std::to_string(tp_number) + " has no eBPF probe there");
  // Copies replaced by keep_definition_order counted for the same location.
  if (auto r = replaced_stats_.find({tp_number, address}); r != replaced_stats_.end()) {
    removed += r->second;
    replaced_stats_.erase(r);
  }
  return removed;
}

CollectorStats BpfCollector::probe_stats(const Probe& p) const {
  CollectorStats s;
  StatsSlot k = read_stats(p.slot);
  s.hits = __atomic_load_n(&control(p.slot).hits, __ATOMIC_RELAXED) + k.hits;
  s.drops = k.drops;
  s.errors = k.errors;
  s.emulated = k.emulated;
  return s;
}

// A location's counts: its probe (and copies that replaced earlier ones)
// while the run lives, what they came to after it.
CollectorStats BpfCollector::stats(uint32_t tp_number, uint64_t address) const {
  if (!run_active_) {
    auto it = retired_stats_.find({tp_number, address});
    return it != retired_stats_.end() ? it->second : CollectorStats{};
  }
  CollectorStats sum;
  if (auto it = replaced_stats_.find({tp_number, address}); it != replaced_stats_.end())
    sum = it->second;
  for (size_t i : index_.at_location(tp_number, address))
    sum += probe_stats(probes_[i]);
  return sum;
}

std::optional<int64_t> BpfCollector::tsv_value(uint32_t number) const {
  if (run_active_) {
    auto it = tsv_slots_.find(number);
    if (it == tsv_slots_.end())
      return std::nullopt;
    return __atomic_load_n(tsv_cell(it->second), __ATOMIC_RELAXED);
  }
  if (auto it = retired_tsvs_.find(number); it != retired_tsvs_.end())
    return it->second;
  return std::nullopt;
}

} // namespace gdbtrace::bpf_collector_internal
