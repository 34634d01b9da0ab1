#include "jumppad/jumppad_collector.h"

#include <algorithm>
#include <array>
#include <asio/steady_timer.hpp>
#include <atomic>
#include <cpuid.h>
#include <cstring>
#include <fstream>
#include <map>
#include <string>

#include "abi/amd64_regs.h"
#include "common/hex.h"
#include "jumppad/jumppad_actions.h"
#include "jumppad/jumppad_area.h"
#include "jumppad/jumppad_guard.h"
#include "jumppad/jumppad_site.h"
#include "jumppad/tsc_clock.h"
#include "target/crash_cleanup.h"
#include "trace/compact_frame.h"
#include "trace/frame.h"

namespace gdbtrace {
namespace {

using namespace jumppad;

// Record::regs order -> gdb register numbers.
constexpr unsigned kRecordRegs[18] = {GT_R15, GT_R14, GT_R13, GT_R12,    GT_R11, GT_R10,
                                      GT_R9,  GT_R8,  GT_RBP, GT_RDI,    GT_RSI, GT_RDX,
                                      GT_RCX, GT_RBX, GT_RAX, GT_EFLAGS, GT_RSP, GT_RIP};

bool cpu_has_rdpid() {
  unsigned a, b, c, d;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 22));
}

// LAHF/SAHF in 64-bit mode (CPUID 0x80000001 ECX bit 0): every x86-64 CPU but
// the first ones.
bool cpu_has_sahf() {
  unsigned a, b, c, d;
  return __get_cpuid(0x80000001, &a, &b, &c, &d) && (c & 1u);
}

bool cpu_has_rdtscp() {
  unsigned a, b, c, d;
  return __get_cpuid(0x80000001, &a, &b, &c, &d) && (d & (1u << 27));
}

// Whether the process runs with a CET shadow stack (Linux 6.6+ lists "shstk"
// in /proc/PID/status's x86_Thread_features once glibc enables it): a call the
// pad runs pushes the return address by hand, which the shadow stack would not
// hold, so the callee's `ret` would fault.
bool uses_shadow_stack(Pid pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.starts_with("x86_Thread_features:"))
      return line.find("shstk") != std::string::npos;
  return false;
}

// How often the stub looks at the rings while a run has pads. A pad never
// enters the kernel, so nothing can wake the stub when a ring fills, as the
// kernel collectors' rings do: the poll stands in for their wake-up and drains
// once a ring is past kDrainMark (half full, as theirs). A ring of 16 384
// records per CPU polled every 10 ms holds ~0.8 M hits per second per CPU; the
// engine's 1 s drain alone held 16 k. A poll reads one head per ring.
//
// Not at every poll: a drain costs the stub ~1 us of CPU per frame, taken from
// the tracee's threads when they keep every CPU busy. Two threads on two CPUs
// bursting 100 000 hits into rings that hold them paid that in the rounds where
// a 10 ms poll fell inside the burst (the stub then ran on one thread's CPU for
// the rest of it); frames of a burst that fits the rings now go to the engine
// after it, at the engine's drain points (reads of frames or counts, its
// one-second heartbeat, tstop).
constexpr auto kPollPeriod = std::chrono::milliseconds(10);
constexpr uint32_t kDrainMarkDivisor = 2; // drain at slots / 2 records in a ring
constexpr uint32_t kDrainBatch = 4096;    // records a ring per drain pass (1 MB)

class JumppadCollector final : public Collector {
public:
  JumppadCollector(NativeTarget& target, asio::io_context& io) : target_(target), poll_(io) {
    target_.set_fault_fixup([this](Pid pid, uint64_t pc) { return recovery_for(pid, pc); });
    crash_cleanup::set_before_detach(guard::disarm_all);
  }
  ~JumppadCollector() override {
    remove_all();
    target_.set_fault_fixup({});
  }

  std::string name() const override { return "jumppad"; }
  unsigned caps() const override { return kPatchesCode | kFastOnly | kStampsHits; }
  std::string describe() const override {
    return "jump pad: ftrace sites patched with a jmp into code in the tracee, per-CPU rings "
           "shared with the stub; conditions over registers, registers and TSV increments (this "
           "version)";
  }

  Result<void> check(const Tracepoint& tp) const override {
    auto a = plan_actions(tp);
    if (!a)
      return a.error();
    return ok();
  }

  Result<void> install(Pid pid, const Tracepoint& tp, TraceContext& ctx) override;
  Result<void> set_enabled(uint32_t number, uint64_t address, bool enabled) override;
  void remove_all() override;
  void drain() override;
  void process_stopped(Pid pid) override { restore_left_sites(pid); }
  CollectorStats stats(uint32_t number, uint64_t address) const override;
  std::optional<int64_t> tsv_value(uint32_t number) const override;

private:
  struct Location {
    Pid pid = 0;
    uint32_t number = 0;
    uint64_t address = 0;
    uint32_t tp_slot = 0;
    bool registers = false;
    std::vector<TsvIncrement> tsv_adds;
    std::optional<AgentExpr> condition;
    std::vector<MemRange> memory;
    uint64_t records = 0; // drained this run: with the drops, its hits (the pad counts none)
  };
  struct Site {
    Pid pid = 0;
    SitePlan plan;
    std::array<uint8_t, kJumpLen> original{};
    bool patched = false;
    std::vector<uint32_t> locations; // indexes into locations_, definition order
  };
  struct PlacedPad {
    uint64_t address = 0;
    std::vector<uint8_t> code;
  };
  struct ProcessArea {
    std::unique_ptr<Area> area;
    std::map<uint32_t, bool> tsvs_initialised; // this run
    // Kept across runs: the k-th location at a site takes the site's k-th tp
    // slot again, and a pad whose bytes come out the same is used again in
    // place, so tstart/tstop cycles do not use up the slot table or the code
    // region (pad code is never rewritten: reuse means identical bytes at the
    // same address, safe for a thread still inside it).
    std::map<uint64_t, std::vector<uint32_t>> site_slots;
    std::map<uint64_t, std::vector<PlacedPad>> site_pads;
    // Every placed pad's memory reads: faulting pc -> recovery pc (pads are
    // never rewritten nor unmapped, so entries stay true for the area's life).
    std::map<uint64_t, uint64_t> fixups;
    std::vector<Record> pending; // taken, stamped after a ring cut short: the next pass's
  };

  Result<Area*> area_for(Pid pid, uint64_t site, size_t staging);
  Result<uint32_t> slot_for(ProcessArea& pa, uint64_t address, size_t kth);
  Result<uint64_t> pad_for(ProcessArea& pa, PadSpec& spec);
  Result<void> write_site(Site& site, uint64_t address, uint64_t pad);
  Result<void> no_thread_inside(Pid pid, uint64_t address) const;
  void frame_from(const Record& r, const Location& loc);
  void emit_in_order(Pid pid, std::vector<Record>& pending, uint64_t cutoff);
  void handle_record(Pid pid, const Record& r);
  uint64_t records_of(uint32_t number, uint64_t address) const;
  void add_memory_blocks(FrameBuilder& frame, const Record& r, const Location& loc);
  std::optional<uint64_t> recovery_for(Pid pid, uint64_t pc) const;
  void arm_poll();
  bool past_drain_mark() const;

  NativeTarget& target_;
  asio::steady_timer poll_;
  bool polling_ = false;
  TraceContext* ctx_ = nullptr;
  std::map<Pid, ProcessArea> areas_;
  std::map<uint64_t, Site> sites_; // this run's, by address
  // Sites a run's end left patched (threads were running): their pads only
  // run the instruction now; the original bytes go back at the next stop.
  std::map<uint64_t, Site> left_;
  void restore_left_sites(Pid pid);
  std::vector<Location> locations_;
  // tp slot -> locations_ index this run, -1 for none: looked up for every
  // record, so a table, not a map.
  std::vector<int32_t> by_slot_ = std::vector<int32_t>(kMaxTpSlots, -1);
  bool in_run(uint32_t tp_slot) const { return tp_slot < kMaxTpSlots && by_slot_[tp_slot] >= 0; }
  std::map<std::pair<uint32_t, uint64_t>, CollectorStats> stats_;
  TscClock clock_; // the records' TSC stamps -> CLOCK_MONOTONIC, the eBPF stamps' clock
  // A record's registers as a compact block: their gdb numbers, the engine's
  // layout for them (slots by ascending number, 8 bytes each) and, for each
  // slot, its index in Record::regs.
  struct PadCompact {
    RegisterMask mask;
    CompactRegisters layout;
    std::array<uint8_t, 18> source{};
    PadCompact();
  };
  const PadCompact compact_;
  FrameBuilder frame_{0};
  std::vector<std::pair<uint64_t, uint32_t>> order_; // emit_in_order's (stamp, index)
};

JumppadCollector::PadCompact::PadCompact() {
  std::vector<unsigned> regnums(std::begin(kRecordRegs), std::end(kRecordRegs));
  std::sort(regnums.begin(), regnums.end());
  for (unsigned r : regnums)
    mask[r] = true;
  layout = CompactRegisters::of_mask(mask);
  for (size_t j = 0; j < regnums.size(); ++j)
    for (uint8_t i = 0; i < 18; ++i)
      if (kRecordRegs[i] == regnums[j])
        source[j] = i;
}

Result<Area*> JumppadCollector::area_for(Pid pid, uint64_t site, size_t staging) {
  auto it = areas_.find(pid);
  if (it != areas_.end() && !it->second.area->still_mapped(pid))
    it = areas_.erase(it); // the process exec'd, or the pid is another process now
  if (it == areas_.end()) {
    auto a = Area::create(target_, pid, site, staging);
    if (!a)
      return a.error();
    it = areas_.emplace(pid, ProcessArea{std::move(*a), {}, {}, {}, {}, {}}).first;
  }
  return it->second.area.get();
}

Result<uint32_t> JumppadCollector::slot_for(ProcessArea& pa, uint64_t address, size_t kth) {
  std::vector<uint32_t>& slots = pa.site_slots[address];
  if (kth < slots.size())
    return slots[kth];
  auto slot = pa.area->new_tp_slot();
  if (slot)
    slots.push_back(*slot);
  return slot;
}

Result<uint64_t> JumppadCollector::pad_for(ProcessArea& pa, PadSpec& spec) {
  std::vector<PlacedPad>& placed = pa.site_pads[spec.site];
  for (const PlacedPad& p : placed) {
    spec.pad = p.address;
    if (auto code = emit_pad(spec); code && *code == p.code)
      return p.address;
  }
  spec.pad = pa.area->next_code(spec.area);
  std::vector<FaultFixup> fixups;
  auto code = emit_pad(spec, &fixups);
  if (!code)
    return code.error();
  auto pad = pa.area->place_code(*code, spec.area);
  if (!pad)
    return pad;
  placed.push_back({*pad, std::move(*code)});
  for (const FaultFixup& f : fixups)
    pa.fixups[*pad + f.fault] = *pad + f.recovery;
  return pad;
}

Result<void> JumppadCollector::no_thread_inside(Pid pid, uint64_t address) const {
  for (const ThreadInfo& t : target_.threads()) {
    if (t.id.pid != pid)
      continue;
    auto regs = target_.read_registers(t.id);
    if (!regs)
      return make_error(regs.error().code, "cannot read a thread's registers");
    uint64_t pc = regs->pc();
    if (pc > address && pc < address + kJumpLen)
      return make_error(EBUSY, "thread " + std::to_string(t.id.tid) +
                                   " is stopped inside the bytes the jump would replace");
  }
  return ok();
}

Result<void> JumppadCollector::write_site(Site& site, uint64_t address, uint64_t pad) {
  auto jmp = site_jump(address, pad);
  if (!jmp)
    return jmp.error();
  if (auto r = no_thread_inside(site.pid, address); !r)
    return r;
  auto w = target_.write_memory(site.pid, address, *jmp);
  if (!w || *w != kJumpLen)
    return make_error(EIO, "cannot write the jump at 0x" + hex::u64(address));
  site.patched = true;
  return ok();
}

Result<void> JumppadCollector::install(Pid pid, const Tracepoint& tp, TraceContext& ctx) {
  auto acts = plan_actions(tp);
  if (!acts)
    return acts.error();
  if (!target_.stopped_epoch(pid))
    return make_error(EBUSY, "the jump pad is written only while every thread is stopped");
  restore_left_sites(pid); // before the site's bytes are read as its original text
  if (sites_.empty()) {    // a new run counts from zero
    clock_.start();
    stats_.clear();
    by_slot_.assign(kMaxTpSlots, -1);
    locations_.clear();
    for (auto& [p, pa] : areas_) {
      pa.tsvs_initialised.clear();
      // Records written since the last drain (threads that were inside a pad
      // at tstop) belong to no run; with tp slots reused they would look like
      // this run's.
      (void)pa.area->take_records();
      pa.pending.clear();
    }
  }
  ctx_ = &ctx;
  const bool new_site = !sites_.count(tp.address);
  Site site = new_site ? Site{} : sites_[tp.address];
  if (new_site) {
    site.pid = pid;
    uint8_t bytes[16] = {};
    auto n = target_.read_memory(pid, tp.address, bytes);
    if (!n || *n < kJumpLen)
      return make_error(EIO, "cannot read the instruction at the site");
    auto plan = plan_site({bytes, *n});
    if (!plan)
      return plan.error();
    if (plan->pushes_return() && uses_shadow_stack(pid))
      return make_error(EOPNOTSUPP, "the site is a call and the process uses a shadow stack: "
                                    "the pad's call would not return");
    site.plan = std::move(*plan);
    std::copy_n(bytes, kJumpLen, site.original.begin());
  }
  auto area = area_for(pid, tp.address, ctx.staging_capacity());
  if (!area)
    return area.error();
  Area& a = **area;
  auto view = a.view_for(target_, pid, tp.address); // the mapping this site's jmp reaches
  if (!view)
    return view.error();
  // gdb's single steps over the site go through the pad without stopping in it.
  target_.add_step_through(pid, *view + kCodeOffset, *view + kCodeOffset + kCodeSize);
  ProcessArea& pa = areas_[pid];
  auto slot = slot_for(pa, tp.address, site.locations.size());
  if (!slot)
    return slot.error();
  Location loc{
      pid,         tp.number, tp.address, *slot, acts->registers, acts->tsv_adds, acts->condition,
      acts->memory};
  // Reads only while this thread, the ptracer, can fix a fault up: the guard
  // word clears when it dies (jumppad_guard.h).
  if (!loc.memory.empty() && !guard::arm(a.guard()))
    return make_error(ENOTSUP, "the kernel refused the stub's robust futex list, which keeps "
                               "memory-reading pads safe once the stub is gone");
  auto& inited = pa.tsvs_initialised;
  for (const TsvIncrement& inc : loc.tsv_adds) {
    auto idx = a.tsv_index(inc.number);
    if (!idx)
      return idx.error();
    if (!inited[inc.number]) {
      std::atomic_ref<int64_t>(a.tsv(*idx)).store(ctx.tsv_seed(inc.number).value_or(0));
      inited[inc.number] = true;
    }
  }
  a.tp_slot(*slot) = TpSlot{0, 0, tp.enabled ? 1u : 0u, 0, 0};
  locations_.push_back(loc);
  site.locations.push_back(uint32_t(locations_.size() - 1));

  PadSpec spec{tp.address,
               0,
               *view,
               Area::armed(*view),
               a.rings() - 1,
               a.slots() - 1,
               a.ring_stride(),
               cpu_has_rdpid(),
               cpu_has_sahf(),
               site.plan,
               {}};
  for (uint32_t li : site.locations) {
    const Location& l = locations_[li];
    PadTracepoint pt{l.tp_slot, {}, true, l.condition, l.memory};
    for (const TsvIncrement& inc : l.tsv_adds)
      pt.tsv_adds.push_back({*a.tsv_index(inc.number), inc.k});
    spec.tps.push_back(std::move(pt));
  }
  auto failed = [&](const Error& e) {
    a.tp_slot(*slot).enabled = 0;
    locations_.pop_back();
    return e;
  };
  auto pad = pad_for(pa, spec);
  if (!pad)
    return failed(pad.error());
  if (auto w = write_site(site, tp.address, *pad); !w)
    return failed(w.error());
  sites_[tp.address] = std::move(site);
  by_slot_[loc.tp_slot] = int32_t(locations_.size() - 1);
  std::vector<bool> valid(GT_NUM_REGS_AVX, false);
  for (unsigned r : kRecordRegs)
    valid[r] = true;
  ctx.set_register_availability(tp.number, valid);
  arm_poll();
  return ok();
}

Result<void> JumppadCollector::set_enabled(uint32_t number, uint64_t address, bool enabled) {
  for (const Location& l : locations_)
    if (l.number == number && l.address == address) {
      auto it = areas_.find(l.pid);
      if (it == areas_.end())
        break;
      std::atomic_ref<uint32_t>(it->second.area->tp_slot(l.tp_slot).enabled)
          .store(enabled ? 1 : 0, std::memory_order_release);
      return ok();
    }
  return make_error(ENOENT, "tracepoint " + std::to_string(number) + " is not installed");
}

// Switches every pad off, then puts the original bytes back where every thread
// is stopped. A thread inside a pad finishes it (the area stays mapped) and
// jumps back to the instruction after the site, which restoring does not move.
void JumppadCollector::remove_all() {
  if (sites_.empty())
    return;
  drain();
  for (auto& [pid, pa] : areas_)
    guard::disarm(pa.area->guard()); // before the detach that may follow
  for (const Location& l : locations_)
    if (auto it = areas_.find(l.pid); it != areas_.end()) {
      Area& a = *it->second.area;
      std::atomic_ref<uint32_t>(a.tp_slot(l.tp_slot).enabled).store(0, std::memory_order_release);
      stats_[{l.number, l.address}] = stats(l.number, l.address);
    }
  for (auto& [address, site] : sites_) {
    if (!site.patched)
      continue;
    if (!target_.stopped_epoch(site.pid)) { // a pad that now only runs the instruction
      left_[address] = std::move(site);
      continue;
    }
    (void)target_.write_memory(site.pid, address, site.original);
  }
  sites_.clear();
  by_slot_.assign(kMaxTpSlots, -1);
  poll_.cancel();
  polling_ = false;
}

// gdb must find the program's own bytes once the run is over (it reads them,
// and would save a jmp as a breakpoint's shadow). A site whose process exec'd
// or unmapped the area is forgotten: its address means nothing there now.
void JumppadCollector::restore_left_sites(Pid pid) {
  if (left_.empty() || !target_.stopped_epoch(pid))
    return;
  auto area = areas_.find(pid);
  bool same_image = area != areas_.end() && area->second.area->still_mapped(pid);
  for (auto it = left_.begin(); it != left_.end();) {
    if (it->second.pid != pid) {
      ++it;
      continue;
    }
    if (same_image)
      (void)target_.write_memory(pid, it->first, it->second.original);
    it = left_.erase(it);
  }
}

void JumppadCollector::arm_poll() {
  if (polling_)
    return;
  polling_ = true;
  poll_.expires_after(kPollPeriod);
  poll_.async_wait([this](const std::error_code& ec) {
    polling_ = false;
    if (ec || sites_.empty())
      return;
    if (past_drain_mark())
      drain();
    arm_poll();
  });
}

bool JumppadCollector::past_drain_mark() const {
  for (const auto& [pid, pa] : areas_)
    if (pa.area->ring_backlog() >= pa.area->slots() / kDrainMarkDivisor)
      return true;
  return false;
}

// The registers go in compact, as the eBPF collector's (the engine stores
// them so): building gdb's whole register block for the engine to compact it
// again was half of the stub's time per record.
void JumppadCollector::frame_from(const Record& r, const Location& loc) {
  FrameBuilder& frame = frame_;
  frame.reset(uint16_t(loc.number));
  if (loc.registers) {
    uint8_t slots[8 * 18];
    const auto& layout = compact_.layout.slots;
    for (size_t j = 0; j < layout.size(); ++j) {
      uint64_t v = r.regs[compact_.source[j]];
      if (layout[j].size < 8) // eflags: 4 bytes, the slot's rest zero
        v &= (uint64_t(1) << (8 * layout[j].size)) - 1;
      std::memcpy(slots + 8 * j, &v, 8);
    }
    frame.add_compact_registers({slots, 8 * layout.size()});
  }
  add_memory_blocks(frame, r, loc);
  ctx_->next_hit_time(clock_.to_monotonic_ns(r.stamp));
  if (loc.registers)
    ctx_->append_compact_frame(frame.finish(), compact_.mask, loc.address);
  else
    ctx_->append_frame(frame.finish(), loc.address);
  ctx_->record_hit(loc.number);
}

// The record's copies of the location's ranges, an 'M' block each. A range
// whose read faulted (the fixup set its bit) is left out, so gdb shows it
// `<unavailable>`, and counted as an error, as the ptrace collector and
// gdbserver skip an unreadable range.
void JumppadCollector::add_memory_blocks(FrameBuilder& frame, const Record& r,
                                         const Location& loc) {
  size_t at = 0;
  for (size_t i = 0; i < loc.memory.size(); ++i) {
    const MemRange& m = loc.memory[i];
    if (r.mem_unreadable & (1u << i)) {
      stats_[{loc.number, loc.address}].errors++;
    } else {
      uint64_t address = m.address;
      if (m.basereg >= 0) // the base register's value is in the record too
        for (unsigned k = 0; k < 18; ++k)
          if (kRecordRegs[k] == unsigned(m.basereg))
            address += r.regs[k];
      frame.add_memory(address, {record_mem(r) + at, m.length});
    }
    at += m.length; // plan_actions kept the sum within kRecordMemBytes
  }
}

std::optional<uint64_t> JumppadCollector::recovery_for(Pid pid, uint64_t pc) const {
  auto a = areas_.find(pid);
  if (a == areas_.end())
    return std::nullopt;
  auto f = a->second.fixups.find(pc);
  if (f == a->second.fixups.end())
    return std::nullopt;
  return f->second;
}

// Records are untrusted input (the tracee can write anything there): a record
// names a tp slot, which must be one of this run's locations; nothing else in
// it is interpreted (register values are data).
//
// In passes of kDrainBatch records a ring, each sorted by stamp and framed
// while it is in the cache (taking a whole 64 MB ring, then sorting the
// 256-byte records themselves, cost ~2 us a record, at real-time priority on
// a CPU the traced threads wanted). At most one lap of each ring per drain.
void JumppadCollector::drain() {
  if (!ctx_)
    return;
  clock_.sample(); // the records are older (or written during this drain: extrapolated)
  for (auto& [pid, pa] : areas_) {
    const uint32_t passes = std::max<uint32_t>(pa.area->slots() / kDrainBatch, 1);
    for (uint32_t pass = 1;; ++pass) {
      uint64_t cutoff = pa.area->take_batch(kDrainBatch, pa.pending);
      if (pass == passes)
        cutoff = UINT64_MAX; // a lap done: the rest is the next drain's
      emit_in_order(pid, pa.pending, cutoff);
      if (cutoff == UINT64_MAX)
        break;
    }
  }
}

// Frames for PENDING's records stamped up to CUTOFF, in stamp order (ties in
// the order taken); the others stay in PENDING.
void JumppadCollector::emit_in_order(Pid pid, std::vector<Record>& pending, uint64_t cutoff) {
  order_.clear();
  for (uint32_t i = 0; i < pending.size(); ++i)
    order_.push_back({pending[i].stamp, i});
  std::sort(order_.begin(), order_.end());
  size_t done = 0;
  for (; done < order_.size() && order_[done].first <= cutoff; ++done)
    handle_record(pid, pending[order_[done].second]);
  if (done == pending.size()) {
    pending.clear();
    return;
  }
  std::vector<Record> rest;
  rest.reserve(order_.size() - done);
  for (size_t k = done; k < order_.size(); ++k)
    rest.push_back(pending[order_[k].second]);
  pending.swap(rest);
}

void JumppadCollector::handle_record(Pid pid, const Record& r) {
  if (!in_run(r.tp_slot) || locations_[size_t(by_slot_[r.tp_slot])].pid != pid)
    return; // an earlier run's, or garbage
  Location* loc = &locations_[size_t(by_slot_[r.tp_slot])];
  if (r.slots != record_slots(memory_bytes(loc->memory)))
    return; // broken (take_batch: slots = 0), or not what this location's pad writes
  loc->records++;
  if (!ctx_->collecting()) {
    stats_[{loc->number, loc->address}].after_stop++;
    return;
  }
  frame_from(r, *loc);
}

uint64_t JumppadCollector::records_of(uint32_t number, uint64_t address) const {
  uint64_t n = 0;
  for (const Location& l : locations_)
    if (l.number == number && l.address == address)
      n += l.records;
  return n;
}

CollectorStats JumppadCollector::stats(uint32_t number, uint64_t address) const {
  CollectorStats s;
  if (auto it = stats_.find({number, address}); it != stats_.end())
    s = it->second;
  for (const Location& l : locations_) {
    if (l.number != number || l.address != address || !in_run(l.tp_slot))
      continue;
    auto it = areas_.find(l.pid);
    if (it == areas_.end())
      continue;
    const TpSlot& t = it->second.area->tp_slot(l.tp_slot);
    s.drops = std::atomic_ref<const uint64_t>(t.drops).load(std::memory_order_relaxed);
    s.hits = std::atomic_ref<const uint64_t>(t.hits).load(std::memory_order_relaxed) + s.drops +
             records_of(number, address);
  }
  return s;
}

// The area's word holds the value the run started from (plus the adds of pads
// that write no record); every record or drop of a location adds that
// location's k, as the pad would have. Exact once drained: the engine drains
// before it asks.
std::optional<int64_t> JumppadCollector::tsv_value(uint32_t number) const {
  std::optional<int64_t> value;
  uint64_t added = 0;
  for (const Location& l : locations_)
    for (const TsvIncrement& inc : l.tsv_adds) {
      if (inc.number != number)
        continue;
      auto it = areas_.find(l.pid);
      if (it == areas_.end())
        continue;
      Area& a = *it->second.area;
      auto idx = a.find_tsv(number);
      if (!idx)
        continue;
      if (!value)
        value = std::atomic_ref<int64_t>(a.tsv(*idx)).load();
      uint64_t hits =
          std::atomic_ref<const uint64_t>(a.tp_slot(l.tp_slot).drops).load() + l.records;
      added += hits * uint64_t(int64_t(inc.k)); // wraps as the pad's adds would
    }
  if (value)
    value = int64_t(uint64_t(*value) + added);
  return value;
}

} // namespace

Result<std::unique_ptr<Collector>> make_jumppad_collector(NativeTarget& target,
                                                          asio::io_context& io) {
  if (!cpu_has_rdtscp())
    return make_error(ENOTSUP, "the CPU has no rdtscp (the pads choose their ring with it)");
  return std::unique_ptr<Collector>(std::make_unique<JumppadCollector>(target, io));
}

} // namespace gdbtrace
