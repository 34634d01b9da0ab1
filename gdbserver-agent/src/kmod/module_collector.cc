#include "kmod/module_collector.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <unistd.h>
#include <unordered_map>
#include <vector>

#include <asio/posix/stream_descriptor.hpp>
#include <asio/post.hpp>

#include "abi/amd64_regs.h"
#include "common/hex.h"
#include "kmod/module_session.h"
#include "trace/collector_probe_site.h"
#include "trace/frame.h"

namespace gdbtrace {

namespace {

using kmod::ModuleSession;

constexpr uint32_t kMinRingShift = 22; // 4 MiB per CPU
// The module's bound on one session's rings, all CPUs together (kmodule/gdbtrace.h).
constexpr uint64_t kMaxSessionRingBytes = uint64_t(256) << 20;

// log2 of each CPU's ring for a trace buffer of BUFFER bytes, as the eBPF
// collector sizes its rings: together they hold half the buffer (a burst of
// hits the stub is slow to drain, e.g. thousands of tracepoints at once),
// never less than 4 MiB per CPU, within the module's bounds.
uint32_t ring_shift_for(size_t buffer) {
  uint64_t ncpu = uint64_t(std::max(sysconf(_SC_NPROCESSORS_CONF), 1L));
  uint64_t share = buffer / 2 / ncpu;
  uint32_t shift = kMinRingShift;
  while (shift < GDBTRACE_MAX_RING_SHIFT && (uint64_t(1) << (shift + 1)) <= share &&
         ncpu << (shift + 1) <= kMaxSessionRingBytes)
    shift++;
  return shift;
}

// A gdb 'M' action longer than a frame block can hold becomes several.
void add_memory_actions(const CollectMemory& m, std::vector<gdbtrace_action>& out) {
  uint64_t done = 0;
  while (done < m.length) {
    uint32_t n = uint32_t(std::min<uint64_t>(m.length - done, GDBTRACE_MAX_MEM));
    gdbtrace_action a{};
    a.kind = GDBTRACE_ACT_MEM;
    a.basereg = m.basereg;
    a.offset = m.offset + int64_t(done);
    a.len = n;
    out.push_back(a);
    done += n;
  }
}

bool uses_printf(const AgentExpr& e) {
  return e.info.uses_printf != 0;
}

// Does the 'R' mask name an x87/SSE/AVX register (collect $regs names all)?
bool wants_fpu(const CollectRegisters& r) {
  for (unsigned regno = GT_ST0; regno <= GT_MXCSR; regno++)
    if (r.names(regno))
      return true;
  for (unsigned regno = GT_YMM0H; regno < GT_NUM_REGS_AVX; regno++)
    if (r.names(regno))
      return true;
  return false;
}

// gdb's mask for `collect $regs`, as opposed to registers named one by one.
bool all_registers(const CollectRegisters& r) {
  for (unsigned regno = 0; regno < GT_NUM_REGS_NOAVX; regno++)
    if (!r.names(regno))
      return false;
  return true;
}

class ModuleCollector final : public Collector {
public:
  ModuleCollector(asio::io_context& io, ModuleSession session)
      : io_(io), session_(std::move(session)) {}

  ~ModuleCollector() override {
    *alive_ = false; // a drain posted by drain_past_mark() finds the collector gone
    if (wakeup_) {
      asio::error_code ec;
      wakeup_->cancel(ec);
      wakeup_->close(ec);
    }
    // session_'s destructor closes /dev/gdbtrace: the module removes every probe.
  }

  std::string name() const override { return "module"; }
  unsigned caps() const override { return kProbesInKernel; }

  std::string describe() const override {
    std::string d = "gdbtrace.ko uprobes, frames built in the kernel";
    if (session_.initialized())
      d += ", " + std::to_string(session_.info().nr_rings) + " per-CPU rings of " +
           std::to_string((1u << ring_shift_) >> 10) + " KiB";
    if (emulation_checked_)
      d += emulate_ ? ", common instructions emulated (no single-step)"
                    : ", instructions single-stepped by the kernel (" + emulation_note_ + ")";
    return d;
  }

  Result<void> check(const Tracepoint& tp) const override {
    if (tp.step_count)
      return make_error(EINVAL, "while-stepping needs the ptrace collector");
    if (tp.has_condition && uses_printf(tp.condition))
      return make_error(EINVAL, "agent printf needs the ptrace collector");
    size_t kernel_actions = 0;
    for (const auto& a : tp.actions) {
      if (auto* x = std::get_if<CollectExpr>(&a)) {
        if (uses_printf(x->expr))
          return make_error(EINVAL, "agent printf needs the ptrace collector");
        kernel_actions++;
      } else if (auto* m = std::get_if<CollectMemory>(&a)) {
        if (m->basereg >= int(GT_NUM_REGS_NOAVX))
          return make_error(EINVAL,
                            "memory relative to a vector register needs the ptrace collector");
        kernel_actions += (m->length + GDBTRACE_MAX_MEM - 1) / GDBTRACE_MAX_MEM;
      } else {
        kernel_actions++;
      }
    }
    if (kernel_actions > GDBTRACE_MAX_ACTIONS)
      return make_error(E2BIG, "more than " + std::to_string(GDBTRACE_MAX_ACTIONS) +
                                   " collect actions (kernel module limit)");
    return ok();
  }

  Result<void> install(Pid pid, const Tracepoint& tp, TraceContext& ctx) override {
    if (auto r = ensure_session(ctx); !r)
      return r;
    if (!run_active_)
      begin_run(ctx);
    ctx_ = &ctx;
    if (auto r = one_location(tp); !r)
      return r;
    if (auto r = define_tsvs(tp, ctx); !r)
      return r;
    if (!batch_)
      return add_probe(pid, tp, ctx);
    // QTStart: checked now (so the engine can pick another collector), added at the end.
    if (auto site = resolve_probe_site(pid, tp.address); !site)
      return site.error();
    if (auto r = fpu_supported(tp); !r)
      return r;
    pending_.push_back(Pending{pid, tp});
    pending_locations_[tp.number] = tp.address;
    return ok();
  }

  void begin_install_batch() override { batch_ = true; }

  // The module's ring records name only the tracepoint number, not the probe
  // that made them: with two locations of one number here, the engine could
  // not tell which location a frame (and its count) belongs to. The engine
  // then gives the other locations to the next collector.
  Result<void> one_location(const Tracepoint& tp) const {
    if (const Probe* p = probe_of(tp.number); p && p->address != tp.address)
      return make_error(EOPNOTSUPP, location_taken(p->address));
    if (auto it = pending_locations_.find(tp.number);
        it != pending_locations_.end() && it->second != tp.address)
      return make_error(EOPNOTSUPP, location_taken(it->second));
    return ok();
  }
  static std::string location_taken(uint64_t address) {
    return "it collects this tracepoint at 0x" + hex::u64(address) +
           " already, and its records do not say which location made them";
  }

  // The kernel runs the consumers of one uprobe newest first: added highest
  // number first, the tracepoints of one address collect in definition order,
  // as gdbserver's do (collector.h). (One added during a run still goes first.)
  Result<void> end_install_batch() override {
    if (!batch_)
      return ok();
    batch_ = false;
    std::vector<Pending> pending = std::move(pending_);
    pending_.clear();
    pending_locations_.clear();
    std::stable_sort(pending.begin(), pending.end(),
                     [](const Pending& a, const Pending& b) { return a.tp.number > b.tp.number; });
    for (const auto& p : pending)
      if (auto r = add_probe(p.pid, p.tp, *ctx_); !r)
        return make_error(r.error().code,
                          "tracepoint " + std::to_string(p.tp.number) + ": " + r.error().message);
    return ok();
  }

  // Registers without the x87/SSE/AVX state, named one by one, need a module
  // that can save it.
  Result<void> fpu_supported(const Tracepoint& tp) const {
    for (const auto& a : tp.actions)
      if (auto* regs = std::get_if<CollectRegisters>(&a))
        if (wants_fpu(*regs) && !(session_.info().features & GDBTRACE_FEAT_FPU) &&
            !all_registers(*regs)) // $regs without them: shown <unavailable>
          return make_error(EOPNOTSUPP, "this gdbtrace.ko cannot collect x87/SSE/AVX registers "
                                        "(load the module of this gdbtrace release)");
    return ok();
  }

  Result<void> add_probe(Pid pid, const Tracepoint& tp, TraceContext& ctx) {
    if (auto r = fpu_supported(tp); !r)
      return r;
    auto site = resolve_probe_site(pid, tp.address);
    if (!site)
      return site.error();
    std::vector<gdbtrace_action> actions;
    bool fpu = false;
    for (const auto& a : tp.actions) {
      gdbtrace_action k{};
      if (auto* regs = std::get_if<CollectRegisters>(&a)) {
        k.kind = GDBTRACE_ACT_REGS;
        if (wants_fpu(*regs) && (session_.info().features & GDBTRACE_FEAT_FPU))
          k.flags = GDBTRACE_ACT_REGS_FPU;
        fpu = fpu || k.flags;
        actions.push_back(k);
      } else if (auto* m = std::get_if<CollectMemory>(&a)) {
        add_memory_actions(*m, actions);
      } else if (auto* x = std::get_if<CollectExpr>(&a)) {
        k.kind = GDBTRACE_ACT_EXPR;
        k.len = uint32_t(x->expr.code.size());
        k.code = reinterpret_cast<uintptr_t>(x->expr.code.data());
        actions.push_back(k);
      }
    }
    gdbtrace_probe_add req{};
    req.pid = pid;
    req.fd = site->fd.get();
    req.offset = site->offset;
    req.address = tp.address;
    req.tp_number = tp.number;
    req.nr_actions = uint32_t(actions.size());
    req.actions = reinterpret_cast<uintptr_t>(actions.data());
    if (tp.has_condition) {
      req.cond = reinterpret_cast<uintptr_t>(tp.condition.code.data());
      req.cond_len = uint32_t(tp.condition.code.size());
    }
    req.flags = tp.enabled ? 0 : GDBTRACE_PROBE_DISABLED;
    // The module decodes the instruction and emulates the forms it knows.
    if (emulate_)
      req.flags |= GDBTRACE_PROBE_EMULATE;
    req.pass_count = tp.pass_count;
    auto id = session_.add_probe(req); // site->fd (UniqueFd) closes when site goes
    if (!id)
      return make_error(id.error().code, id.error().message + " (" + site->path + ")");
    probes_[tp.number] = Probe{*id, tp.number, tp.address};
    ctx.set_register_availability(tp.number, register_availability(fpu));
    return ok();
  }

  Result<void> set_enabled(uint32_t tp_number, uint64_t address, bool enabled) override {
    if (const Probe* p = probe_of(tp_number); p && p->address == address)
      return session_.enable(p->id, enabled);
    return ok();
  }

  void remove_all() override {
    batch_ = false;
    pending_.clear();
    pending_locations_.clear();
    if (!session_.initialized())
      return;
    drain(); // frames produced so far belong to this run
    for (const auto& [number, p] : probes_)
      if (auto st = session_.probe_status(p.id))
        add_stats(finished_[{p.tp, p.address}], *st);
    (void)session_.stop();
    (void)session_.remove_all();
    probes_.clear();
    if (run_active_)
      last_run_cpu_drops_ = run_cpu_drops();
    run_active_ = false;
  }

  // A ring per CPU (ring r is CPU r's): a drop is counted on the CPU whose
  // ring was full. The rings' counters run for the session: a run's are the
  // difference from its start.
  std::vector<uint64_t> drops_by_cpu() const override {
    return run_active_ ? run_cpu_drops() : last_run_cpu_drops_;
  }

  void drain() override {
    if (!session_.initialized() || !ctx_)
      return;
    session_.drain([this](std::span<const uint8_t> frame) {
      FrameView view(frame, regblock_size_);
      if (!view.has_header())
        return true;
      const Probe* p = probe_of(view.tp_number());
      if (!p)
        return true; // a probe of an earlier run
      if (!ctx_->collecting()) {
        ++after_stop_[{p->tp, p->address}]; // the run stopped (tfull, a pass count) before this hit
        return true;
      }
      ctx_->record_hit(p->tp);
      ctx_->append_frame(frame, p->address); // a full buffer stops the run (engine)
      return true;
    });
    // The module stops collecting by itself when a pass count is reached.
    if (run_active_)
      if (auto st = session_.status();
          st && !st->running && st->stop_reason == GDBTRACE_STOP_PASSCOUNT)
        ctx_->request_stop(TraceStopReason::PassCount, {}, st->stop_tp);
  }

  CollectorStats stats(uint32_t tp_number, uint64_t address) const override {
    CollectorStats s;
    if (auto it = finished_.find({tp_number, address}); it != finished_.end())
      s = it->second;
    if (const Probe* p = probe_of(tp_number); p && p->address == address)
      if (auto st = session_.probe_status(p->id))
        add_stats(s, *st);
    if (auto it = after_stop_.find({tp_number, address}); it != after_stop_.end())
      s.after_stop = it->second;
    return s;
  }

  std::optional<int64_t> tsv_value(uint32_t number) const override {
    if (!session_.initialized() || !defined_tsvs_.count(number))
      return std::nullopt;
    auto v = session_.get_tsv(number);
    return v ? std::optional<int64_t>(*v) : std::nullopt;
  }

private:
  struct Probe {
    uint32_t id, tp;
    uint64_t address;
  };
  // The probe of a frame: one per number here (one_location).
  const Probe* probe_of(uint32_t tp_number) const {
    auto it = probes_.find(tp_number);
    return it == probes_.end() ? nullptr : &it->second;
  }

  static void add_stats(CollectorStats& s, const gdbtrace_probe_status& st) {
    s.hits += st.hits;
    s.drops += st.drops; // lost in the module's ring, before the engine saw them
    s.errors += st.errors;
  }

  Result<void> ensure_session(TraceContext& ctx) {
    if (session_.initialized() && !run_active_ && probes_.empty() &&
        ring_shift_for(ctx.staging_capacity()) > ring_shift_)
      reopen_session(); // a new run needs larger rings (a stream, a larger buffer)
    if (session_.initialized()) {
      if (session_.info().regblock_size != 0 && ctx.register_block_size() != regblock_size_)
        return make_error(EINVAL, "register block size changed during the session");
      return ok();
    }
    regblock_size_ = ctx.register_block_size();
    // Sized at the session's first install, from that run's staging need (the
    // trace buffer, or more while the run streams to a file).
    ring_shift_ = ring_shift_for(ctx.staging_capacity());
    if (auto r = session_.init(regblock_size_, ring_shift_); !r)
      return r;
    check_emulation();
    arm_wakeup();
    return ok();
  }

  // The rings are sized at INIT, once per open of the device: between runs
  // (no probe in), a new session replaces the old. Its trace state variables
  // are defined again as tracepoints use them; if the device cannot be opened
  // again, the old session and its rings stay.
  void reopen_session() {
    auto fresh = ModuleSession::open();
    if (!fresh)
      return;
    wakeup_.reset(); // its wait ends (operation_aborted); its dup of the old fd closes
    session_ = std::move(*fresh);
    defined_tsvs_.clear();
    last_run_cpu_drops_.clear();
  }

  // Emulation is only safe where the kernel skips the single-step after a
  // handler moved ip (else the instruction would run twice). The module tests
  // that at load and refuses GDBTRACE_PROBE_EMULATE where it failed; its
  // features say why, and `monitor gdbtrace status` shows it.
  // GDBTRACE_KMOD_EMULATE=0 turns it off (benchmarks compare both).
  void check_emulation() {
    emulation_checked_ = true;
    const char* env = std::getenv("GDBTRACE_KMOD_EMULATE");
    if (env && std::string(env) == "0") {
      emulation_note_ = "emulation disabled by GDBTRACE_KMOD_EMULATE=0";
      return;
    }
    const uint32_t features = session_.info().features;
    emulate_ = (features & GDBTRACE_FEAT_EMULATE) != 0;
    if (emulate_)
      return;
    if (features & GDBTRACE_FEAT_EMU_DOUBLE)
      emulation_note_ = "the module's self-test saw this kernel single-step an instruction a "
                        "handler had emulated: it would run twice";
    else if (features & GDBTRACE_FEAT_EMU_UNTESTED)
      emulation_note_ = "the module's emulation self-test could not run at load (kernel log)";
    else
      emulation_note_ = "module without emulation";
  }

  // A new run: counters and TSVs start over from the engine's values.
  void begin_run(TraceContext& ctx) {
    finished_.clear();
    after_stop_.clear();
    for (uint32_t n : defined_tsvs_)
      (void)session_.define_tsv(n, ctx.tsv_seed(n).value_or(0));
    run_start_cpu_drops_ = session_.ring_drops();
    (void)session_.start();
    run_active_ = true;
  }

  std::vector<uint64_t> run_cpu_drops() const {
    std::vector<uint64_t> now = session_.ring_drops();
    for (size_t r = 0; r < now.size() && r < run_start_cpu_drops_.size(); r++)
      now[r] -= run_start_cpu_drops_[r];
    return now;
  }

  Result<void> define_tsvs(const Tracepoint& tp, TraceContext& ctx) {
    std::set<uint32_t> nums; // every TSV the programs read or write (from the verifier)
    auto add = [&nums](const AgentExpr& e) {
      nums.insert(e.tsvs_read.begin(), e.tsvs_read.end());
      nums.insert(e.tsvs_written.begin(), e.tsvs_written.end());
    };
    if (tp.has_condition)
      add(tp.condition);
    for (const auto& a : tp.actions)
      if (auto* x = std::get_if<CollectExpr>(&a))
        add(x->expr);
    for (uint32_t n : nums) {
      if (defined_tsvs_.count(n))
        continue;
      if (n >= GDBTRACE_MAX_TSVS)
        return make_error(EINVAL, "trace state variable number too large for the kernel module");
      if (auto r = session_.define_tsv(n, ctx.tsv_seed(n).value_or(0)); !r)
        return r;
      defined_tsvs_.insert(n);
    }
    return ok();
  }

  // WITH_FPU: the tracepoint's 'R' blocks carry the x87/SSE registers too (and
  // AVX's upper halves in an 816-byte block).
  std::vector<bool> register_availability(bool with_fpu) const {
    std::vector<bool> v(GT_NUM_REGS_AVX, false);
    for (unsigned r = 0; r < 32; r++)
      v[r] = (session_.info().reg_valid >> r) & 1;
    for (unsigned r = 32; r < 64 && r < v.size(); r++)
      v[r] = (session_.info().reg_valid_hi >> (r - 32)) & 1;
    if (with_fpu) {
      for (unsigned r = GT_ST0; r <= GT_MXCSR; r++)
        v[r] = true;
      if (regblock_size_ >= GT_REGBLOCK_SIZE_AVX)
        for (unsigned r = GT_YMM0H; r < GT_NUM_REGS_AVX; r++)
          v[r] = true;
    }
    return v;
  }

  // poll() on /dev/gdbtrace wakes when a ring passes half full or the module
  // stopped the run; the engine's drain timer covers the rest.
  void arm_wakeup() {
    if (!wakeup_) {
      int fd = ::dup(session_.fd());
      if (fd < 0)
        return;
      wakeup_.emplace(io_, fd);
    }
    wakeup_->async_wait(asio::posix::stream_descriptor::wait_read,
                        [this](const asio::error_code& ec) {
                          if (ec)
                            return;
                          drain();
                          arm_wakeup();
                          drain_past_mark();
                        });
  }

  // The module wakes the stub only as a ring crosses half full; a wake that
  // comes while this handler drains is lost (asio waits for the next edge),
  // and the ring would fill until the engine's one-second drain. A ring still
  // past the mark after re-arming is drained again (BpfCollector does the same).
  void drain_past_mark() {
    if (!run_active_ || !session_.any_half_full())
      return;
    asio::post(io_, [this, alive = alive_] {
      if (!*alive)
        return;
      drain();
      drain_past_mark();
    });
  }

  asio::io_context& io_;
  ModuleSession session_;
  std::optional<asio::posix::stream_descriptor> wakeup_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  TraceContext* ctx_ = nullptr;
  uint32_t regblock_size_ = 0;
  uint32_t ring_shift_ = kMinRingShift;
  // Each ring's drop counter when this run started, and the last run's drops by CPU.
  std::vector<uint64_t> run_start_cpu_drops_, last_run_cpu_drops_;
  bool run_active_ = false;
  // QTStart's tracepoints, added at end_install_batch.
  struct Pending {
    Pid pid;
    Tracepoint tp;
  };
  bool batch_ = false;
  std::vector<Pending> pending_;
  std::unordered_map<uint32_t, uint64_t> pending_locations_; // number -> address, for one_location
  bool emulation_checked_ = false, emulate_ = false;
  std::string emulation_note_;
  // By tracepoint number (one location each: one_location): looked up per
  // frame, per status row and per install, so thousands stay cheap.
  std::unordered_map<uint32_t, Probe> probes_;
  std::map<std::pair<uint32_t, uint64_t>, CollectorStats> finished_; // by location
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> after_stop_;     // hits seen after the stop
  std::set<uint32_t> defined_tsvs_;
};

} // namespace

Result<std::unique_ptr<Collector>> make_module_collector(asio::io_context& io) {
  auto session = kmod::ModuleSession::open();
  if (!session)
    return session.error();
  return std::unique_ptr<Collector>(std::make_unique<ModuleCollector>(io, std::move(*session)));
}

} // namespace gdbtrace
