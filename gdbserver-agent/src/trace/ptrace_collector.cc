#include "trace/ptrace_collector.h"

#include <algorithm>
#include <map>
#include <vector>

#include "common/hex.h"
#include "trace/ax_target.h"
#include "trace/frame.h"

namespace gdbtrace {
namespace {

class PtraceCollector final : public Collector {
public:
  explicit PtraceCollector(NativeTarget& target) : target_(target) {}
  ~PtraceCollector() override { remove_all(); }

  std::string name() const override { return "ptrace"; }
  unsigned caps() const override { return kI386Processes; }
  std::string describe() const override {
    return "int3 traps handled by gdbtrace-server over ptrace; every tracepoint kind incl. "
           "while-stepping; slowest (two context switches per hit)";
  }
  Result<void> check(const Tracepoint&) const override { return ok(); }

  Result<void> install(Pid pid, const Tracepoint& tp, TraceContext& ctx) override {
    ctx_ = &ctx;
    // The first probe of a run: a new run counts from zero (gdbserver resets
    // at tstart). remove_all keeps them, for the status after tstop.
    if (sites_.empty())
      stats_.clear();
    auto& site = sites_[tp.address];
    if (site.tps.empty()) {
      auto r = target_.insert_trace_breakpoint(
          pid, tp.address, [this](ThreadId t, uint64_t addr, int step, const RegisterBlock& regs) {
            return on_trap(t, addr, step, regs);
          });
      if (!r) {
        sites_.erase(tp.address);
        return make_error(r.error().code, "cannot insert a trap at 0x" + hex::u64(tp.address) +
                                              ": " + r.error().message);
      }
      site.pid = pid;
    }
    site.tps.push_back(tp);
    return ok();
  }

  Result<void> set_enabled(uint32_t number, uint64_t address, bool enabled) override {
    auto it = sites_.find(address);
    if (it != sites_.end())
      for (auto& tp : it->second.tps)
        if (tp.number == number) {
          tp.enabled = enabled;
          return ok();
        }
    return make_error(ENOENT, "tracepoint " + std::to_string(number) + " is not installed");
  }

  void remove_all() override {
    for (auto& [addr, site] : sites_)
      (void)target_.remove_trace_breakpoint(site.pid, addr);
    sites_.clear();
    stepping_.clear();
  }

  CollectorStats stats(uint32_t number, uint64_t address) const override {
    auto it = stats_.find({number, address});
    return it == stats_.end() ? CollectorStats{} : it->second;
  }

private:
  struct Site {
    Pid pid = -1;
    std::vector<Tracepoint> tps;
  };
  struct Stepping {
    uint64_t site;
    uint32_t number;
    uint64_t remaining;
  };

  const Tracepoint* find_tp(uint64_t site, uint32_t number) const {
    auto it = sites_.find(site);
    if (it == sites_.end())
      return nullptr;
    for (auto& tp : it->second.tps)
      if (tp.number == number)
        return &tp;
    return nullptr;
  }

  bool on_trap(ThreadId thread, uint64_t address, int step_index, const RegisterBlock& regs) {
    if (!ctx_)
      return false;
    if (step_index > 0)
      return on_step(thread, regs);
    auto it = sites_.find(address);
    if (it == sites_.end())
      return false;
    for (const Tracepoint& tp : it->second.tps) {
      if (!tp.enabled)
        continue;
      // After the run stopped (tfull, a pass count, an error: the engine
      // removes the traps once this callback returns) a hit is still a hit,
      // counted as one after the stop; it makes no frame.
      bool stopped = !ctx_->collecting();
      if (tp.has_condition) {
        AxTargetScope cond_scope = eval_scope(thread.pid, regs, nullptr);
        uint64_t value = 0;
        int rc = ax_eval_on_target(tp.condition, cond_scope, &value);
        if (rc != AX_OK) {
          if (!stopped)
            fail(tp, std::string("condition: ") + ax_strerror(rc));
          continue;
        }
        if (!value)
          continue;
      }
      CollectorStats& st = stats_[{tp.number, tp.address}];
      ++st.hits;
      if (stopped) {
        ++st.after_stop;
        continue;
      }
      ctx_->record_hit(tp.number);
      if (!collect(thread.pid, tp, tp.actions, regs))
        continue;
      if (tp.step_count)
        stepping_[thread.tid].push_back(Stepping{address, tp.number, tp.step_count});
    }
    return stepping_.count(thread.tid) != 0;
  }

  bool on_step(ThreadId thread, const RegisterBlock& regs) {
    auto it = stepping_.find(thread.tid);
    if (it == stepping_.end())
      return false;
    auto& list = it->second;
    for (auto& s : list) {
      const Tracepoint* tp = find_tp(s.site, s.number);
      if (!tp || !ctx_->collecting()) {
        s.remaining = 0;
        continue;
      }
      collect(thread.pid, *tp, tp->step_actions, regs);
      if (--s.remaining == 0)
        ctx_->while_stepping_done(s.number);
    }
    std::erase_if(list, [](const Stepping& s) { return s.remaining == 0; });
    if (list.empty()) {
      stepping_.erase(it);
      return false;
    }
    return true;
  }

  // Builds one frame from ACTIONS and appends it. False on an evaluation error
  // (the run is then stopping with terror) or when the buffer refused it.
  bool collect(Pid pid, const Tracepoint& tp, const std::vector<TraceAction>& actions,
               const RegisterBlock& regs) {
    FrameBuilder frame(uint16_t(tp.number));
    AxTargetScope scope = eval_scope(pid, regs, &frame);
    for (const auto& action : actions) {
      if (std::holds_alternative<CollectRegisters>(action)) {
        RegisterLayout layout = ctx_->register_layout();
        uint8_t block[GT_REGBLOCK_SIZE_AVX];
        layout.encode(regs, block); // in the process's 'g' order (i386 or amd64)
        frame.add_registers({block, layout.bytes()});
      } else if (auto* m = std::get_if<CollectMemory>(&action)) {
        uint64_t addr = uint64_t(m->offset);
        if (m->basereg >= 0) {
          RegisterLayout layout = ctx_->register_layout();
          unsigned basereg = layout.block_regno(unsigned(m->basereg)); // a remote number
          if (!regs.valid.test(basereg)) {
            ++stats_[{tp.number, tp.address}].errors;
            continue;
          }
          uint64_t base = regs.get_u64(basereg);
          if (layout.i386())
            base = uint32_t(base);
          addr += base;
          if (layout.i386())
            addr = uint32_t(addr); // an i386 address wraps at 4 GiB
        }
        std::vector<uint8_t> bytes(m->length);
        auto got = target_.read_memory(pid, addr, bytes);
        if (!got || *got == 0) {
          // Like gdbserver, an unreadable range is skipped; a stack piece past
          // the mapping's end is expected.
          if (!m->stack)
            ++stats_[{tp.number, tp.address}].errors;
          continue;
        }
        bytes.resize(*got);
        frame.add_memory(addr, bytes);
      } else if (auto* x = std::get_if<CollectExpr>(&action)) {
        uint64_t ignored = 0;
        int rc = ax_eval_on_target(x->expr, scope, &ignored);
        if (rc != AX_OK) {
          fail(tp, std::string("action: ") + ax_strerror(rc));
          return false;
        }
      }
    }
    // A frame the full buffer refuses is the engine's drop, counted there.
    // Kernel collectors' frames are not drained first (that cost grew with
    // their probe count): the buffer holds each collector's frames in hit
    // order, kernel frames entering at their drain (docs/collectors.md).
    return ctx_->append_frame(frame.finish(), tp.address);
  }

  // Agent expressions at a hit see the thread's registers and memory, the
  // engine's TSVs, and print to gdb's console.
  AxTargetScope eval_scope(Pid pid, const RegisterBlock& regs, FrameBuilder* frame) {
    return AxTargetScope{target_, pid,  regs, [this](std::string text) { ctx_->console(text); },
                         ctx_,    frame};
  }

  void fail(const Tracepoint& tp, const std::string& what) {
    ++stats_[{tp.number, tp.address}].errors;
    ctx_->request_stop(TraceStopReason::Error,
                       "tracepoint " + std::to_string(tp.number) + " " + what, tp.number);
  }

  NativeTarget& target_;
  TraceContext* ctx_ = nullptr;
  std::map<uint64_t, Site> sites_;
  std::map<Tid, std::vector<Stepping>> stepping_;
  std::map<std::pair<uint32_t, uint64_t>, CollectorStats> stats_; // by location
};

} // namespace

std::unique_ptr<Collector> make_ptrace_collector(NativeTarget& target) {
  return std::make_unique<PtraceCollector>(target);
}

} // namespace gdbtrace
