// TraceEngine: run control, the TraceContext collectors report into, and trace
// frame selection. The operations the server calls are in trace_operations.cc.
#include <algorithm>
#include <chrono>
#include <utility>

#include "common/hex.h"
#include "trace/compact_frame.h"
#include "trace/frame.h"
#include "trace/stack_actions.h"
#include "trace/trace_engine_impl.h"

namespace gdbtrace {

namespace {
constexpr uint32_t kTimestampTsv = 1; // gdbserver's builtin $trace_timestamp
} // namespace

TraceEngine::Impl::Impl(asio::io_context& io_, NativeTarget& target_, Hooks hooks_)
    : io(io_), target(target_), hooks(std::move(hooks_)), drain_timer(io_) {
  tsvs[kTimestampTsv] = TsvEntry{0, 0, "trace_timestamp", true};
}

// ---------------------------------------------------------------- TraceContext

// The layout of the run's process, fixed at QTStart (its frames keep it after
// the run); before the first run, the current process's (tracepoint
// definitions are checked against its register count).
RegisterLayout TraceEngine::Impl::register_layout() const {
  if (run_layout)
    return *run_layout;
  return target.register_layout(hooks.current_pid ? hooks.current_pid() : -1);
}

uint32_t TraceEngine::Impl::register_block_size() const {
  if (run_layout)
    return run_block_size;
  return register_layout().bytes();
}

uint32_t TraceEngine::Impl::num_regs() const {
  return register_layout().count();
}

bool TraceEngine::Impl::append_frame(std::span<const uint8_t> frame, uint64_t address) {
  return append(frame, nullptr, address);
}

bool TraceEngine::Impl::append_compact_frame(std::span<const uint8_t> frame,
                                             const RegisterMask& registers, uint64_t address) {
  return append(frame, &registers, address);
}

bool TraceEngine::Impl::append(std::span<const uint8_t> frame, const RegisterMask* compact,
                               uint64_t address) {
  uint64_t hit_ns = std::exchange(next_hit_ns, 0);
  if (!running || frame.size() < kFrameHeaderSize)
    return false;
  if (hold_frames && hit_ns) { // stored at the drain's end, in hit order (drain_all)
    held.hold(frame, compact, address, hit_ns);
    return true;
  }
  uint16_t tp = gt_tframe_tp(frame.data());
  if (!last_counters || last_counters_at != Location{tp, address}) {
    last_counters = &counters[{tp, address}];
    last_counters_at = {tp, address};
  }
  EngineCounters& c = *last_counters;
  // A compact frame names its registers; a tfile frame holds those its
  // collector declared (the others are not stored, and read as unavailable).
  uint16_t set = TraceBuffer::kAllRegisters;
  if (compact) {
    set = buffer.register_set(*compact);
  } else if (auto known = register_sets.find(tp); known != register_sets.end()) {
    set = known->second;
  }
  const CompactRegisters* layout = compact ? &buffer.layout_of(set) : nullptr;
  FrameView view(frame, register_block_size(), layout ? layout->block_size() : 0);
  // Collectors' frames come from kernel rings: one that does not parse would
  // break every tfile reader downstream (qTBuffer and tsave expand them). One
  // walk checks it, finds its first register block and counts the compact ones.
  const uint8_t* first_registers = nullptr;
  size_t compact_blocks = 0;
  bool parsed = view.total_size() == frame.size() && view.for_each([&](const FrameBlock& b) {
    if (b.type == GT_TFRAME_REGS || b.type == GT_TFRAME_COMPACT_REGS) {
      if (!first_registers)
        first_registers = b.data;
      compact_blocks += b.type == GT_TFRAME_COMPACT_REGS;
    }
    return true;
  });
  if (!parsed) {
    ++c.malformed;
    return false;
  }
  // tfind pc/range use the frame's pc: the register block's rip, else the
  // location that collected it (a number with several locations has one
  // address each).
  uint64_t pc = 0;
  if (first_registers) {
    int at = layout ? layout->slot_offset(GT_RIP) : int(gt_reg_offset(GT_RIP));
    if (at >= 0)
      pc = get_le<uint64_t>(first_registers + at);
  }
  if (!pc)
    pc = address;
  stream_before_discard(frame.size()); // never more than the frame's size once stored
  bool stored = layout ? buffer.append_compact(frame, tp, pc, set, compact_blocks)
                       : buffer.append(frame, tp, pc, set);
  if (!stored) {
    ++c.buffer_drops;
    request_stop(TraceStopReason::BufferFull, {}, 0);
    return false;
  }
  ++c.frames;
  c.bytes += buffer.frame_stream_bytes(long(buffer.frame_count()) - 1); // its tfile size
  // Cut for the stream now, while its bytes are in the cache: reading the
  // drain's frames back at its end missed them (~20 % of a streamed frame).
  if (stream_takes_next_frame() && stream_cut_one(long(buffer.frame_count()) - 1))
    ++streamed_seq;
  return true;
}

void TraceEngine::Impl::set_register_availability(uint32_t tp, const std::vector<bool>& valid) {
  register_sets[tp] = buffer.register_set(valid);
}

std::optional<int64_t> TraceEngine::Impl::get_tsv(uint32_t number) {
  auto it = tsvs.find(number);
  if (it == tsvs.end())
    return std::nullopt;
  if (it->second.builtin)
    return trace_timestamp();
  return it->second.value;
}

void TraceEngine::Impl::set_tsv(uint32_t number, int64_t value) {
  auto it = tsvs.find(number);
  if (it != tsvs.end() && !it->second.builtin)
    it->second.value = value;
}

int64_t TraceEngine::Impl::trace_timestamp() {
  using namespace std::chrono;
  return duration_cast<microseconds>(steady_clock::now().time_since_epoch()).count();
}

void TraceEngine::Impl::record_hit(uint32_t tp_number) {
  if (!running)
    return;
  // pass_hits serves pass counts only: a tracepoint without one costs no
  // insert per frame (with thousands of tracepoints hit in turn, each insert
  // was a cache miss in the drain).
  auto* e = first_with_number(tp_number);
  if (!e || !e->tp.pass_count)
    return;
  uint64_t hits = ++pass_hits[tp_number];
  if (e->tp.step_count == 0 && hits >= e->tp.pass_count)
    request_stop(TraceStopReason::PassCount, {}, tp_number);
}

void TraceEngine::Impl::while_stepping_done(uint32_t tp_number) {
  if (!running)
    return;
  auto* e = first_with_number(tp_number);
  if (e && e->tp.pass_count && pass_hits[tp_number] >= e->tp.pass_count)
    request_stop(TraceStopReason::PassCount, {}, tp_number);
}

void TraceEngine::Impl::request_stop(TraceStopReason reason, std::string text, uint32_t tp) {
  if (!running || stop_pending)
    return;
  // Stop after the collector's current callback returns: it may be inside a
  // trap handler and still owns the frame it is building.
  stop_pending = true;
  pending_reason = reason;
  pending_text = std::move(text);
  pending_tp = tp;
  asio::post(io, [this] { apply_pending_stop(); });
}

void TraceEngine::Impl::apply_pending_stop() {
  // A stale post after the run ended (or a new run started) finds nothing pending.
  if (running && stop_pending)
    stop_run(pending_reason, pending_text, pending_tp);
}

void TraceEngine::Impl::console(const std::string& text) {
  if (hooks.console)
    hooks.console(text);
}

// As install() gives it to collectors: with the stack snapshot actions when stacks are on.
std::optional<Tracepoint> TraceEngine::Impl::definition(uint32_t tp_number,
                                                        uint64_t address) const {
  const TracepointEntry* e = tracepoints.find(tp_number, address);
  if (!e)
    return std::nullopt;
  return stack_bytes ? with_stack_actions(e->tp, stack_bytes) : e->tp;
}

// ---------------------------------------------------------------- run control

VerifyEnv TraceEngine::Impl::verify_env() const {
  VerifyEnv env;
  env.num_regs = num_regs();
  if (running)
    env.tsv_exists = [this](uint32_t n) { return tsvs.count(n) != 0; };
  return env;
}

// gdb sends QTDV after the tracepoints, so a reference to an undefined TSV can
// only be refused now. The verifier already listed each expression's TSVs when
// the QTDP arrived (AgentExpr::tsvs_read/tsvs_written): check those lists, with
// the error text verify_expr gives for the same fault.
Result<void> TraceEngine::Impl::check_tsv_references(const Tracepoint& tp) const {
  std::string what = "tracepoint " + std::to_string(tp.number);
  auto check = [&](const AgentExpr& e, const char* kind) -> Result<void> {
    for (const auto* list : {&e.tsvs_read, &e.tsvs_written})
      for (uint32_t n : *list)
        if (!tsvs.count(n))
          return make_error(EINVAL, what + " " + kind +
                                        ": bytecode rejected: " + ax_strerror(AX_ERR_BAD_TSV) +
                                        " (number " + std::to_string(n) + ")");
    return ok();
  };
  if (tp.has_condition)
    if (auto r = check(tp.condition, "condition"); !r)
      return r;
  for (const auto* list : {&tp.actions, &tp.step_actions})
    for (const auto& a : *list)
      if (auto* x = std::get_if<CollectExpr>(&a))
        if (auto r = check(x->expr, "action"); !r)
          return r;
  return ok();
}

TracepointEntry* TraceEngine::Impl::find(uint32_t number, uint64_t address) {
  return tracepoints.find(number, address);
}

TracepointEntry* TraceEngine::Impl::first_with_number(uint32_t number) {
  return tracepoints.first_with_number(number);
}

const TracepointEntry* TraceEngine::Impl::first_with_number(uint32_t number) const {
  return const_cast<Impl*>(this)->first_with_number(number);
}

Result<void> TraceEngine::Impl::install(TracepointEntry& entry, unsigned exclude) {
  // With stacks on, collectors see the tracepoint with the stack snapshot
  // actions added; gdb's definition (upload, re-definition checks) stays as sent.
  const Tracepoint effective =
      stack_bytes ? with_stack_actions(entry.tp, stack_bytes) : Tracepoint{};
  const Tracepoint& tp = stack_bytes ? effective : entry.tp;
  std::string why_not;
  // A collector declined because gdb's own breakpoint holds the address: not
  // worth a console line (every hit there traps for that breakpoint anyway,
  // and gdb's testsuite expects `Continuing.` right before `Breakpoint N`);
  // `monitor gdbtrace status` names it.
  std::string breakpoint_note;
  std::string fast_note;
  for (auto& c : collectors) {
    if (!preferred_backend.empty() && c->name() != preferred_backend)
      continue;
    if (c->caps() & exclude)
      continue;
    const bool fast_only = c->caps() & Collector::kFastOnly;
    // A plain `trace` goes to a fast-only collector (the jump pad) only where
    // that collector's patch already is (gdb's trace-break.exp: `ftrace X`
    // then `trace X`): nothing else may probe the bytes under the jmp, and
    // the pad collects a `trace` exactly as an `ftrace`.
    if (fast_only && !tp.fast && preferred_backend.empty()) {
      const TracepointEntry* there = installed_at(tp.address, &entry);
      if (!there || there->collector != c.get())
        continue;
    }
    if (register_layout().i386() && !(c->caps() & Collector::kI386Processes)) {
      why_not += (why_not.empty() ? "" : "; ") + c->name() +
                 ": cannot collect from an i386 (32-bit) process";
      continue;
    }
    // The pad only adds to TSVs, in its own copy: not for one that another
    // tracepoint reads or sets (that one would not see the pad's adds).
    if (fast_only && preferred_backend.empty())
      if (std::string why = shared_tsv_conflict(entry); !why.empty()) {
        fast_note += (fast_note.empty() ? "" : "; ") + c->name() + ": " + why;
        continue;
      }
    auto ok = c->check(tp);
    if (!ok) {
      // An ftrace the jump pad declines is an ordinary fallback (most sites of
      // unoptimised code): said in the status row, not on gdb's console.
      std::string& to = fast_only && preferred_backend.empty() ? fast_note : why_not;
      to += (to.empty() ? "" : "; ") + c->name() + ": " + ok.error().message;
      continue;
    }
    // One int3 per address: a kernel uprobe and a ptrace trap there would be the
    // same byte, and the uprobe would swallow the trap (the ptrace tracepoint
    // silently never hits); a jump pad's jmp covers 5 bytes no int3 may touch.
    // Tracepoints at one address share a kind of collector.
    constexpr unsigned kKind = Collector::kProbesInKernel | Collector::kPatchesCode;
    if (const TracepointEntry* other = installed_at(tp.address, &entry);
        other && (other->collector->caps() & kKind) != (c->caps() & kKind)) {
      std::string& to = fast_only && preferred_backend.empty() ? fast_note : why_not;
      to += (to.empty() ? "" : "; ") + c->name() + " cannot share the address with " +
            "tracepoint " + std::to_string(other->tp.number) + " (collected by " +
            other->collector->name() + ")";
      continue;
    }
    if (c->caps() & Collector::kProbesInKernel) {
      if (hooks.before_kernel_probe)
        if (auto r = hooks.before_kernel_probe(traced_pid, tp.address); !r) {
          breakpoint_note = c->name() + " cannot share the address with " + r.error().message;
          continue;
        }
      entry.original_text = text_under_probe(entry);
    }
    if (c->caps() & Collector::kPatchesCode)
      entry.original_text = text_under_jump(entry);
    auto installed = c->install(traced_pid, tp, *this);
    if (!installed) {
      std::string& to = fast_only && preferred_backend.empty() ? fast_note : why_not;
      to += (to.empty() ? "" : "; ") + c->name() + ": " + installed.error().message;
      continue;
    }
    if (!why_not.empty())
      console("tracepoint " + std::to_string(tp.number) + ": " + why_not + "; using " + c->name() +
              "\n");
    entry.collector_note =
        breakpoint_note + (breakpoint_note.empty() || fast_note.empty() ? "" : "; ") + fast_note;
    if (hooks.debug)
      hooks.debug(
          "tracepoint " + std::to_string(tp.number) + " at 0x" + hex::u64(tp.address) +
          (tp.fast ? " (ftrace)" : "") + ": " + c->name() +
          (entry.collector_note.empty() && why_not.empty()
               ? ""
               : " (" + entry.collector_note + (why_not.empty() ? "" : "; ") + why_not + ")"));
    entry.collector = c.get();
    entry.installed = true;
    return ok;
  }
  if (collectors.empty())
    return make_error(ENOSYS, "no trace collector is available");
  if (!breakpoint_note.empty())
    why_not += (why_not.empty() ? "" : "; ") + breakpoint_note;
  if (!fast_note.empty())
    why_not = fast_note + (why_not.empty() ? "" : "; ") + why_not;
  if (why_not.empty())
    return make_error(ENOENT, "backend '" + preferred_backend + "' is not available");
  return make_error(EINVAL, "tracepoint " + std::to_string(tp.number) + ": " + why_not);
}

const TracepointEntry* TraceEngine::Impl::installed_at(uint64_t address,
                                                       const TracepointEntry* except) const {
  for (const TracepointEntry* e : tracepoints.at_address(address))
    if (e != except && e->installed && e->collector)
      return e;
  return nullptr;
}

std::vector<uint8_t> TraceEngine::Impl::text_under_jump(const TracepointEntry& entry) {
  // Another tracepoint at this address may have its jump in already (the same
  // kind of collector: its saved text is the whole 5 bytes).
  for (const TracepointEntry* e : tracepoints.at_address(entry.tp.address))
    if (e != &entry && e->installed && !e->original_text.empty())
      return e->original_text;
  std::vector<uint8_t> text(5); // the jmp rel32 a patching collector writes
  auto n = target.read_memory(traced_pid, entry.tp.address, text);
  if (!n)
    return {};
  text.resize(*n);
  return text;
}

std::vector<uint8_t> TraceEngine::Impl::text_under_probe(const TracepointEntry& entry) {
  // Another tracepoint at this address may have its uprobe in already.
  for (const TracepointEntry* e : tracepoints.at_address(entry.tp.address))
    if (e != &entry && e->installed && !e->original_text.empty())
      return e->original_text;
  // A uprobe changes one byte, except that kernels with optimized uprobes (6.18+)
  // turn a 5-byte nop into a call into their trampoline after the first hit.
  static constexpr uint8_t kNop5[] = {0x0f, 0x1f, 0x44, 0x00, 0x00};
  std::vector<uint8_t> text(sizeof kNop5);
  auto n = target.read_memory(traced_pid, entry.tp.address, text);
  if (!n || *n == 0)
    return {};
  bool nop5 = *n == sizeof kNop5 && std::equal(text.begin(), text.end(), kNop5);
  text.resize(nop5 ? sizeof kNop5 : 1);
  return text;
}

void TraceEngine::Impl::stop_run(TraceStopReason reason, std::string text, uint32_t tp) {
  if (!running)
    return;
  drain_all(); // frames already produced by kernel collectors belong to this run
  running = false;
  stop_pending = false;
  stop_time = trace_timestamp();
  stop_reason = reason;
  stop_text = std::move(text);
  stop_tp = tp;
  drain_timer.cancel();
  drain_placement.restore(); // processes the stub starts later must not inherit the run's mask
  for (auto& c : collectors)
    c->remove_all();
  // Keep e->collector: status and qTP still report the backend and its counts.
  for (auto& e : tracepoints)
    e->installed = false;
  end_stream({}); // the end marker and the final status
}

TraceStatus TraceEngine::Impl::status() const {
  // gdb sends the tstop note (QTNotes:tstop:) after QTStop: read it now, as gdbserver does.
  const bool note_is_text = stop_reason == TraceStopReason::Requested && stop_text.empty();
  return TraceStatus{.running = running,
                     .ever_ran = ever_ran,
                     .reason = stop_reason,
                     .stop_text = note_is_text ? stop_note : stop_text,
                     .stop_tp = stop_tp,
                     .frames = buffer.frame_count(),
                     .created = buffer.frames_created(),
                     .size = buffer.capacity(),
                     .free = buffer.free_bytes(),
                     .circular = buffer.circular(),
                     .disconnected_tracing = disconnected_tracing,
                     .start_time = start_time,
                     .stop_time = stop_time,
                     .user = user,
                     .notes = notes};
}

// ---------------------------------------------------------------- public API

TraceEngine::TraceEngine(asio::io_context& io, NativeTarget& target, Hooks hooks)
    : impl_(std::make_unique<Impl>(io, target, std::move(hooks))) {}

TraceEngine::~TraceEngine() {
  if (impl_->running)
    impl_->stop_run(TraceStopReason::Requested);
}

void TraceEngine::add_collector(std::unique_ptr<Collector> collector) {
  impl_->collectors.push_back(std::move(collector));
}

void TraceEngine::note_unavailable_collector(const std::string& name, const std::string& reason) {
  impl_->unavailable_collectors.emplace_back(name, reason);
}

std::string TraceEngine::Impl::fallback_text() const {
  for (const auto& c : collectors)
    if (c->caps() & Collector::kProbesInKernel)
      return {};
  if (unavailable_collectors.empty())
    return {};
  std::string s = "no in-kernel collector (";
  for (size_t i = 0; i < unavailable_collectors.size(); i++)
    s +=
        (i ? "; " : "") + unavailable_collectors[i].first + ": " + unavailable_collectors[i].second;
  return s + "), so tracepoints are collected with ptrace, which stops the thread at every hit "
             "(30-100x slower). To collect in the kernel, run gdbtrace-server as root or with "
             "CAP_BPF and CAP_PERFMON on a kernel with BPF and uprobes, or load gdbtrace.ko";
}

bool TraceEngine::frame_selected() const {
  return impl_->current_frame >= 0;
}

Result<void> TraceEngine::move_to_trap_collector(uint64_t address) {
  return impl_->move_to_trap_collector(address);
}

// gdb wants a software breakpoint where the kernel collects a tracepoint, and
// the machine has no debug-register traps to put it elsewhere: the
// tracepoints at ADDRESS go to a collector that traps with ptrace, which
// shares the int3 with gdb's breakpoint as gdbserver does. Everything is
// checked before anything is removed, so a refusal leaves the run as it was.
Result<void> TraceEngine::Impl::move_to_trap_collector(uint64_t address) {
  std::vector<TracepointEntry*> moving;
  for (TracepointEntry* e : tracepoints.at_address(address))
    if (e->installed && e->collector && (e->collector->caps() & Collector::kProbesInKernel))
      moving.push_back(e);
  if (moving.empty())
    return ok();
  auto refuse = [](const TracepointEntry& e, const std::string& why) {
    return make_error(EBUSY, "tracepoint " + std::to_string(e.tp.number) + " cannot move to the " +
                                 "ptrace collector: " + why);
  };
  if (!preferred_backend.empty())
    return refuse(*moving[0],
                  "'monitor gdbtrace backend " + preferred_backend + "' chose its collector");
  bool trap_collector = false;
  for (auto& c : collectors)
    trap_collector |= !(c->caps() & Collector::kProbesInKernel);
  if (!trap_collector)
    return refuse(*moving[0], "there is none");
  for (auto* e : moving) {
    if (!(e->collector->caps() & Collector::kRemovesOneProbe))
      return refuse(*e, e->collector->name() + " removes its probes only all at once");
    if (uses_kept_tsvs(e->tp))
      return refuse(*e, "it uses trace state variables, which " + e->collector->name() +
                            " keeps in the kernel for this run");
  }
  drain_all();
  for (auto* e : moving) {
    auto removed = e->collector->uninstall(e->tp.number, address);
    if (!removed) // cannot happen for kRemovesOneProbe collectors
      return refuse(*e, removed.error().message);
    e->earlier += *removed;
    e->installed = false;
    e->original_text.clear();
  }
  for (auto* e : moving) {
    std::string from = e->collector->name();
    e->collector = nullptr;
    if (auto r = install(*e, Collector::kProbesInKernel); !r) {
      console("gdbtrace: " + r.error().message + "; it collects no more in this run\n");
      return r;
    }
    // No console line, as at install (see there): the status says it.
    e->collector_note =
        "moved from " + from + " during the run: gdb's breakpoint here needs the int3";
  }
  return ok();
}

bool TraceEngine::Impl::uses_kept_tsvs(const Tracepoint& tp) const {
  auto kept = [this](const AgentExpr& x) {
    for (const auto* list : {&x.tsvs_read, &x.tsvs_written})
      for (uint32_t n : *list)
        if (auto it = tsvs.find(n); it == tsvs.end() || !it->second.builtin)
          return true;
    return false;
  };
  if (tp.has_condition && kept(tp.condition))
    return true;
  for (const auto* list : {&tp.actions, &tp.step_actions})
    for (const auto& a : *list)
      if (auto* x = std::get_if<CollectExpr>(&a); x && kept(x->expr))
        return true;
  return false;
}

std::optional<std::string> TraceEngine::software_breakpoint_conflict(uint64_t address) const {
  for (const TracepointEntry* e : impl_->tracepoints.at_address(address))
    if (e->installed && e->collector && (e->collector->caps() & Collector::kProbesInKernel))
      return "tracepoint " + std::to_string(e->tp.number) + " is collected in the kernel (" +
             e->collector->name() + ") at this address, which takes the int3 trap";
  return std::nullopt;
}

void TraceEngine::hide_collector_text(Pid pid, uint64_t address, std::span<uint8_t> bytes) const {
  if (pid != impl_->traced_pid || bytes.empty())
    return;
  // Only the probes whose saved text (at most a 5-byte nop, text_under_probe)
  // can overlap the range: gdb reads memory at every stop, and a scan of every
  // tracepoint was most of the stub's time with 10 000 of them.
  constexpr uint64_t kLongestText = 16;
  uint64_t lo = address > kLongestText ? address - kLongestText : 0;
  uint64_t hi = address + bytes.size() < address ? UINT64_MAX : address + bytes.size();
  impl_->tracepoints.for_each_in(lo, hi, [&](const TracepointEntry& e) {
    if (!e.installed)
      return;
    for (size_t i = 0; i < e.original_text.size(); ++i) {
      uint64_t at = e.tp.address + i;
      if (at >= address && at - address < bytes.size())
        bytes[at - address] = e.original_text[i];
    }
  });
}

RegisterLayout TraceEngine::register_layout() const {
  return impl_->register_layout();
}

RegisterBlock TraceEngine::frame_registers() const {
  RegisterBlock regs;
  std::vector<uint8_t> scratch;
  auto frame = impl_->buffer.frame(impl_->current_frame, scratch);
  if (frame.empty())
    return regs;
  FrameView view(frame, impl_->register_block_size());
  if (auto r = view.registers()) {
    RegisterLayout layout = impl_->register_layout();
    regs = layout.decode(r->data, r->length);
    uint32_t n = layout.count();
    const std::vector<bool>* held = impl_->buffer.frame_registers_held(impl_->current_frame);
    for (uint32_t i = 0; i < n; ++i)
      if (!held || (i < held->size() && (*held)[i]))
        regs.valid.set(layout.block_regno(i));
    return regs;
  }
  // No 'R' block: like gdbserver, the tracepoint address stands in for the pc:
  // that of the location that collected the frame (append_frame kept it), so
  // a frame of a number with several locations is shown where it was taken.
  regs.set_u64(GT_RIP, impl_->buffer.frame_pc(impl_->current_frame));
  return regs;
}

Result<size_t> TraceEngine::frame_memory(uint64_t address, std::span<uint8_t> out) const {
  std::vector<uint8_t> scratch;
  auto frame = impl_->buffer.frame(impl_->current_frame, scratch);
  if (frame.empty())
    return make_error(EINVAL, "no trace frame selected");
  if (out.empty())
    return size_t(0);
  FrameView view(frame, impl_->register_block_size());
  size_t got = 0;
  uint64_t next_block = UINT64_MAX; // lowest collected address above ADDRESS
  view.for_each([&](const FrameBlock& b) {
    if (b.type != GT_TFRAME_MEM)
      return true;
    if (b.address <= address && address - b.address < b.length) {
      size_t n = std::min<size_t>(out.size(), b.length - (address - b.address));
      std::memcpy(out.data(), b.data + (address - b.address), n);
      got = n;
      return false;
    }
    if (b.address > address)
      next_block = std::min(next_block, b.address);
    return true;
  });
  if (got)
    return got;
  // Not collected: serve the part before the next collected block from the
  // target if gdb declared it read-only (QTro), else it is unavailable.
  uint64_t want = std::min<uint64_t>(out.size(), next_block - address);
  uint64_t last = address + want - 1;
  for (auto [start, end] : impl_->readonly_regions)
    if (start <= address && last <= end) {
      Pid pid = impl_->traced_pid > 0
                    ? impl_->traced_pid
                    : (impl_->hooks.current_pid ? impl_->hooks.current_pid() : -1);
      if (pid <= 0)
        break;
      return impl_->target.read_memory(pid, address, out.first(want));
    }
  return make_error(EIO, "memory at 0x" + hex::u64(address) + " is unavailable in trace frame " +
                             std::to_string(impl_->current_frame));
}

std::string TraceEngine::traceframe_info_xml() const {
  std::string xml = "<traceframe-info>\n";
  std::vector<uint8_t> scratch;
  auto frame = impl_->buffer.frame(impl_->current_frame, scratch);
  if (!frame.empty()) {
    FrameView(frame, impl_->register_block_size()).for_each([&](const FrameBlock& b) {
      if (b.type == GT_TFRAME_MEM)
        xml += "<memory start=\"0x" + hex::u64(b.address) + "\" length=\"0x" + hex::u64(b.length) +
               "\"/>\n";
      else if (b.type == GT_TFRAME_TSV)
        xml += "<tvar id=\"" + std::to_string(b.tsv) + "\"/>\n";
      return true;
    });
  }
  return xml + "</traceframe-info>\n";
}

void TraceEngine::on_process_exit(Pid pid, const std::string& how) {
  if (impl_->running && pid == impl_->traced_pid)
    impl_->stop_run(TraceStopReason::Error, "process " + std::to_string(pid) + " " + how);
}

void TraceEngine::on_process_detach(Pid pid) {
  if (impl_->running && pid == impl_->traced_pid)
    impl_->stop_run(TraceStopReason::Requested, "gdb detached from process " + std::to_string(pid));
}

void TraceEngine::on_process_exec(Pid pid) {
  if (impl_->running && pid == impl_->traced_pid)
    impl_->stop_run(TraceStopReason::Error,
                    "process " + std::to_string(pid) + " exec'd a new program");
}

void TraceEngine::on_process_stopped(Pid pid) {
  for (auto& c : impl_->collectors)
    c->process_stopped(pid);
}

void TraceEngine::on_disconnect() {
  impl_->current_frame = -1;
  if (impl_->running && !impl_->disconnected_tracing)
    impl_->stop_run(TraceStopReason::Disconnected);
}

} // namespace gdbtrace
