#include "bpf/bpf_collector.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <asio/posix/stream_descriptor.hpp>
#include <dirent.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "abi/amd64_regs.h"
#include "ax/ax.h"
#include "bpf/bpf_codegen.h"
#include "bpf/bpf_layout.h"
#include "bpf/bpf_rings.h"
#include "bpf/bpf_support.h"
#include "common/unique_fd.h"
#include "trace/collector_probe_site.h"
#include "trace/compact_frame.h"
#include "trace/frame.h"

namespace gdbtrace {
namespace {

using bpf::ControlSlot;
using bpf::StatsSlot;

// gdbserver's (and the engine's) builtin $trace_timestamp.
constexpr uint32_t kTimestampTsv = 1;

// Bytes of each CPU's ring for a trace buffer of BUFFER bytes: the rings stage
// frames until the stub's next drain (a wake-up at half full, else the
// engine's one-second heartbeat), so together they hold half the buffer, within [1 MB, 128 MB] per
// CPU (1 MB: above the largest frame; a big buffer gets big rings because a stub starved of CPU on
// a busy machine — it needs ~0.8 µs per `collect $regs` frame — falls behind a tracee producing
// ~800 MB/s, and what the rings cannot hold is dropped). Pages are touched only as the rings fill.
// GDBTRACE_BPF_RINGBUF_MB overrides.
size_t ring_bytes_for(size_t buffer, size_t ncpu) {
  auto pow2_ceil = [](size_t n) {
    size_t p = 1;
    while (p < n)
      p <<= 1;
    return p;
  };
  if (const char* mb = getenv("GDBTRACE_BPF_RINGBUF_MB"))
    if (size_t n = size_t(atol(mb)); n > 0)
      return pow2_ceil(n) << 20;
  size_t want = buffer / 2 / std::max<size_t>(ncpu, 1);
  size_t p = pow2_ceil(want);
  if (p > want)
    p >>= 1; // the power of two at or below the share
  return std::clamp<size_t>(p, size_t(1) << 20, size_t(128) << 20);
}

int64_t monotonic_us() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

// One installed tracepoint: the uprobe_multi link (or perf event) that
// attaches its program, which holds the program. Closing it removes the uprobe
// from the tracee.
struct Probe {
  uint32_t tp = 0;
  uint64_t address = 0;
  uint32_t slot = 0;
  UniqueFd event;
  uint64_t drops_reported = 0;
  Pid pid = 0;
  std::shared_ptr<const Tracepoint> def; // to attach it again (keep_definition_order)
  // Loaded, to be attached at the end of the install batch.
  UniqueFd program;
  std::optional<ProbeSite> site;
  bool emulates = false; // its program can emulate the probed instruction (bpf_emulate.h)
  // The registers of its records' compact register block (trace/compact_frame.h):
  // the program writes them in register-number order, as CompactRegisters::of_mask lays them out.
  RegisterMask registers;
  uint64_t attached_at = 0; // attach sequence number (0: not attached yet)
};

class BpfCollector final : public Collector {
public:
  BpfCollector(asio::io_context& io, bpf::KernelSupport support)
      : io_(io), support_(std::move(support)) {}
  ~BpfCollector() override;

  Result<void> init();
  Result<void> size_rings(const TraceContext& ctx);

  std::string name() const override { return "ebpf"; }
  unsigned caps() const override { return kProbesInKernel | kRemovesOneProbe; }
  Result<void> check(const Tracepoint& tp) const override;
  Result<void> install(Pid pid, const Tracepoint& tp, TraceContext& ctx) override;
  void begin_install_batch() override { batch_ = true; }
  Result<void> end_install_batch() override;
  Result<void> set_enabled(uint32_t tp_number, uint64_t address, bool enabled) override;
  void remove_all() override;
  Result<CollectorStats> uninstall(uint32_t tp_number, uint64_t address) override;
  void drain() override;
  CollectorStats stats(uint32_t tp_number, uint64_t address) const override;
  std::optional<int64_t> tsv_value(uint32_t number) const override;
  std::string describe() const override;

private:
  ControlSlot& control(uint32_t slot) const {
    return static_cast<ControlSlot*>(control_mem_.get())[slot];
  }
  int64_t* tsv_cell(uint32_t index) const { return static_cast<int64_t*>(tsv_mem_.get()) + index; }
  void start_run(TraceContext& ctx);
  std::optional<uint32_t> tsv_index(uint32_t number, TraceContext* ctx);
  bpf::CodegenOptions codegen_options(uint32_t slot, TraceContext* ctx,
                                      uint32_t regblock_size) const;
  Result<UniqueFd> attach(const ProbeSite& site, Pid pid, int prog_fd) const;
  Result<Probe> load_and_attach(Pid pid, std::shared_ptr<const Tracepoint> def, TraceContext& ctx,
                                bool enabled, std::optional<uint32_t> skips_of_slot,
                                bool defer = false);
  void keep_definition_order(const Probe& added, TraceContext& ctx);
  bool emulation_available() const {
    return support_.ctx_writes && support_.task_dr7_offset.has_value() && !no_emulation_;
  }
  std::optional<bpf::EmulationSite> emulation_site(const ProbeSite& site, uint64_t address,
                                                   uint32_t slot) const;
  void set_emulating_probes();
  uint64_t mark_threads_at(Pid pid, uint64_t address, uint32_t slot);
  uint64_t copy_skips(uint32_t from_slot, uint32_t to_slot);
  void arm_watch();
  void handle_record(std::span<const uint8_t> record);
  void account_drops();
  StatsSlot read_stats(uint32_t slot) const;
  CollectorStats probe_stats(const Probe& p) const;
  Probe* find_slot(uint32_t slot);
  void retire_stats();

  asio::io_context& io_;
  bpf::KernelSupport support_;
  UniqueFd control_, tsvs_, stats_, skips_;
  Mapping control_mem_, tsv_mem_;
  bpf::PerCpuRings rings_;
  std::unique_ptr<asio::posix::stream_descriptor> watch_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);

  TraceContext* ctx_ = nullptr;
  std::vector<Probe> probes_;
  std::map<uint32_t, uint32_t> tsv_slots_; // TSV number -> index in the tsv map
  uint32_t next_slot_ = 0;
  bool run_active_ = false;
  bool draining_ = false;
  bool watching_ = false;
  bool discard_ = false; // records left in the ring after remove_all belong to no run
  bool batch_ = false;   // inside QTStart's installs: attach at end_install_batch
  uint64_t attach_seq_ = 0;
  // GDBTRACE_BPF_EMULATE=0: never emulate (benchmarks compare both, as GDBTRACE_KMOD_EMULATE=0).
  bool no_emulation_ = [] {
    const char* env = getenv("GDBTRACE_BPF_EMULATE");
    return env && std::string(env) == "0";
  }();
  using Location = std::pair<uint32_t, uint64_t>; // tracepoint number, address
  // Results of the last run, still asked for after the probes are gone.
  std::map<Location, CollectorStats> retired_stats_;
  std::map<uint32_t, int64_t> retired_tsvs_;
  // Counts of probes of this run replaced by a copy (keep_definition_order),
  // and hits whose record arrived after the run stopped.
  std::map<Location, CollectorStats> replaced_stats_;
};

Result<void> BpfCollector::init() {
  LIBBPF_OPTS(bpf_map_create_opts, mmapable, .map_flags = BPF_F_MMAPABLE);
  auto make_map = [](bpf_map_type type, const char* name, uint32_t key, uint32_t value,
                     uint32_t entries, const bpf_map_create_opts* opts) -> Result<UniqueFd> {
    int fd = bpf_map_create(type, name, key, value, entries, opts);
    if (fd < 0)
      return make_error(errno, bpf::explain_errno(errno, std::string("bpf map ") + name));
    return UniqueFd(fd);
  };
  auto control = make_map(BPF_MAP_TYPE_ARRAY, "gdbtrace_ctl", 4,
                          bpf::kMaxProbes * sizeof(ControlSlot), 1, &mmapable);
  if (!control)
    return control.error();
  auto tsvs = make_map(BPF_MAP_TYPE_ARRAY, "gdbtrace_tsv", 4, bpf::kMaxTsvs * 8, 1, &mmapable);
  if (!tsvs)
    return tsvs.error();
  auto stats = make_map(BPF_MAP_TYPE_PERCPU_ARRAY, "gdbtrace_stats", 4, sizeof(StatsSlot),
                        bpf::kMaxProbes, nullptr);
  if (!stats)
    return stats.error();
  auto skips = make_map(BPF_MAP_TYPE_HASH, "gdbtrace_skip", 8, 8, bpf::kMaxSkips, nullptr);
  if (!skips)
    return skips.error();
  skips_ = std::move(*skips);
  control_ = std::move(*control);
  tsvs_ = std::move(*tsvs);
  stats_ = std::move(*stats);

  auto map_memory = [](int fd, size_t bytes) -> Result<Mapping> {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
      return make_error(errno, bpf::explain_errno(errno, "mmap of a bpf map"));
    return Mapping(p, bytes);
  };
  auto cm = map_memory(control_.get(), bpf::kMaxProbes * sizeof(ControlSlot));
  if (!cm)
    return cm.error();
  auto tm = map_memory(tsvs_.get(), bpf::kMaxTsvs * 8);
  if (!tm)
    return tm.error();
  control_mem_ = std::move(*cm);
  tsv_mem_ = std::move(*tm);
  return ok();
}

// The rings are the big allocation (locked kernel memory): made at the first
// install of a run, sized from that run's trace buffer, so a server that never
// traces does not hold them. Called between runs only (no program uses them).
Result<void> BpfCollector::size_rings(const TraceContext& ctx) {
  size_t ncpu = size_t(std::max(libbpf_num_possible_cpus(), 1));
  size_t bytes = ring_bytes_for(ctx.buffer_capacity(), ncpu);
  if (rings_ && rings_.ring_bytes() == bytes)
    return ok();
  watching_ = false;
  watch_.reset(); // cancels a pending wait; its handler sees the error and returns
  rings_ = {};
  auto rings = bpf::PerCpuRings::create(bytes);
  if (!rings)
    return make_error(rings.error().code, rings.error().message +
                                              " (rings sized from set trace-buffer-size, or "
                                              "GDBTRACE_BPF_RINGBUF_MB per CPU)");
  rings_ = std::move(*rings);
  int efd = dup(rings_.epoll_fd()); // the descriptor object owns (closes) its fd
  if (efd < 0)
    return make_error(errno, "dup: " + std::string(strerror(errno)));
  watch_ = std::make_unique<asio::posix::stream_descriptor>(io_, efd);
  return ok();
}

BpfCollector::~BpfCollector() {
  *alive_ = false;
  remove_all();
  watch_.reset();
}

std::string BpfCollector::describe() const {
  std::string s =
      std::string("eBPF: uprobe (") + (support_.uprobe_multi ? "uprobe_multi link" : "perf event") +
      ") + generated BPF program per tracepoint (Linux " + support_.kernel_release + "); ";
  if (emulation_available())
    s += "common instructions emulated by the program (register writes; loads, moves, "
         "add/sub, lea), others single-stepped by the kernel";
  else if (support_.ctx_writes)
    s += "kernel single-steps the probed instruction (register writes supported, but thread "
         "debug-register state unknown: no vmlinux BTF)";
  else
    s += "kernel single-steps the probed instruction (register writes need Linux 6.19+)";
  s += support_.sleepable ? "; sleepable programs (memory not paged in yet is read)"
                          : "; memory the tracee has not touched yet reads as unavailable";
  if (rings_)
    s += "; " + std::to_string(rings_.ring_count()) + " per-CPU rings of " +
         std::to_string(rings_.ring_bytes() >> 10) + " KB";
  if (!support_.task_fsbase_offset)
    s += "; fs_base unavailable (no vmlinux BTF)";
  return s;
}

bpf::CodegenOptions BpfCollector::codegen_options(uint32_t slot, TraceContext* ctx,
                                                  uint32_t regblock_size) const {
  bpf::CodegenOptions o;
  o.slot = slot;
  o.regblock_size = regblock_size;
  o.task_fsbase_offset = support_.task_fsbase_offset;
  o.timestamp_tsv = kTimestampTsv;
  o.sleepable = support_.sleepable;
  // Half full, as the module: the other half is the headroom for a stub slow
  // to get a CPU (a 32 MB ring's 16 MB is ~400 ms of the fastest producer in
  // docs/benchmarks.md, 290-byte `collect $regs, *p` records at ~150 k/s per
  // CPU; the stub drains ~3x faster than two such CPUs fill their rings). A
  // lower mark gives the same drain work in smaller batches, each taking a
  // CPU from the tracee mid-burst. Only the crossing frame wakes the stub.
  o.wakeup_bytes = uint32_t(rings_.ring_bytes() / 2);
  if (ctx)
    o.timestamp_offset_us = ctx->trace_timestamp() - monotonic_us();
  return o;
}

// Cheap: what the code generator refuses without generating. The program is
// generated once, by install(); what only generation finds (frame size, room
// for TSVs, registers a uprobe cannot see) fails there, and the engine moves on
// to the next collector all the same.
Result<void> BpfCollector::check(const Tracepoint& tp) const {
  if (auto r = bpf::check_tracepoint(tp); !r)
    return r;
  if (probes_.size() >= bpf::kMaxProbes)
    return make_error(ENOSPC, "the eBPF collector holds at most " +
                                  std::to_string(bpf::kMaxProbes) + " tracepoints");
  return ok();
}

void BpfCollector::start_run(TraceContext& ctx) {
  memset(control_mem_.get(), 0, bpf::kMaxProbes * sizeof(ControlSlot));
  memset(tsv_mem_.get(), 0, bpf::kMaxTsvs * 8);
  tsv_slots_.clear();
  retired_stats_.clear();
  retired_tsvs_.clear();
  replaced_stats_.clear();
  next_slot_ = 0;
  ctx_ = &ctx;
  run_active_ = true;
  discard_ = false;
  // Skips left over from the last run (threads that never resumed there).
  uint64_t key = 0;
  while (bpf_map_get_next_key(skips_.get(), nullptr, &key) == 0)
    if (bpf_map_delete_elem(skips_.get(), &key) != 0)
      break;
  // Per-CPU counters start from zero for every slot.
  std::vector<uint8_t> zeros(size_t(libbpf_num_possible_cpus()) * sizeof(StatsSlot));
  for (uint32_t s = 0; s < bpf::kMaxProbes; s++)
    bpf_map_update_elem(stats_.get(), &s, zeros.data(), BPF_ANY);
}

// Index of TSV NUMBER in the map; the first use in a run seeds it with the
// engine's value (its initial value from QTDV, or what the run has so far).
std::optional<uint32_t> BpfCollector::tsv_index(uint32_t number, TraceContext* ctx) {
  if (auto it = tsv_slots_.find(number); it != tsv_slots_.end())
    return it->second;
  if (tsv_slots_.size() >= bpf::kMaxTsvs)
    return std::nullopt;
  uint32_t index = uint32_t(tsv_slots_.size());
  tsv_slots_[number] = index;
  int64_t initial = ctx ? ctx->get_tsv(number).value_or(0) : 0;
  __atomic_store_n(tsv_cell(index), initial, __ATOMIC_RELAXED);
  return index;
}

Result<UniqueFd> BpfCollector::attach(const ProbeSite& site, Pid pid, int prog_fd) const {
  // uprobe_path: the file the resolver opened and checked, not a path that
  // could name another file by now.
  if (support_.uprobe_multi)
    return bpf::attach_uprobe_link(prog_fd, site.fd_path(), site.offset, pid, site.path);
  perf_event_attr attr{};
  attr.size = sizeof(attr);
  attr.type = uint32_t(support_.uprobe_pmu_type);
  // uprobe_path: the file the resolver opened and checked, not a path that
  // could name another file by now.
  std::string path = site.fd_path();
  attr.config1 = uint64_t(uintptr_t(path.c_str()));
  attr.config2 = site.offset; // probe_offset
  // pid filter: the kernel matches the uprobe against the process's mm, so
  // every thread of PID hits it and no other process does.
  int fd = int(syscall(SYS_perf_event_open, &attr, pid, -1, -1, PERF_FLAG_FD_CLOEXEC));
  if (fd < 0)
    return make_error(errno, bpf::explain_errno(errno, "uprobe on " + site.path + " offset " +
                                                           std::to_string(site.offset)));
  UniqueFd event(fd);
  if (ioctl(fd, PERF_EVENT_IOC_SET_BPF, prog_fd) < 0)
    return make_error(errno, bpf::explain_errno(errno, "attaching the BPF program to the uprobe"));
  if (ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) < 0)
    return make_error(errno, bpf::explain_errno(errno, "enabling the uprobe"));
  return event;
}

Result<void> BpfCollector::install(Pid pid, const Tracepoint& tp, TraceContext& ctx) {
  if (!run_active_) {
    if (auto r = size_rings(ctx); !r)
      return r;
    start_run(ctx);
  }
  auto def = std::make_shared<const Tracepoint>(tp);
  auto probe = load_and_attach(pid, def, ctx, tp.enabled, std::nullopt, batch_);
  if (!probe)
    return probe.error();
  probes_.push_back(std::move(*probe));
  if (!batch_) {
    keep_definition_order(probes_.back(), ctx);
    set_emulating_probes();
  }
  arm_watch();
  return ok();
}

// Attaches the batch's probes, highest tracepoint number first, so that the
// tracepoints of one address collect in definition order (see collector.h).
Result<void> BpfCollector::end_install_batch() {
  if (!batch_)
    return ok();
  batch_ = false;
  std::vector<Probe*> pending;
  for (auto& p : probes_)
    if (p.program)
      pending.push_back(&p);
  std::stable_sort(pending.begin(), pending.end(),
                   [](const Probe* a, const Probe* b) { return a->tp > b->tp; });
  for (Probe* p : pending) {
    auto event = attach(*p->site, p->pid, p->program.get());
    if (!event)
      return make_error(event.error().code,
                        "tracepoint " + std::to_string(p->tp) + ": " + event.error().message);
    p->event = std::move(*event);
    p->attached_at = ++attach_seq_;
    p->program = UniqueFd(); // the link holds the program
    p->site.reset();
  }
  set_emulating_probes();
  return ok();
}

// Generates, loads and (unless DEFER) attaches DEF's program in a new slot,
// ENABLED or not.
// Threads that sit at the address skip their first hit (see mark_threads_at),
// or, for a copy of a probe, those that the probe in SKIPS_OF_SLOT still skips.
Result<Probe> BpfCollector::load_and_attach(Pid pid, std::shared_ptr<const Tracepoint> def,
                                            TraceContext& ctx, bool enabled,
                                            std::optional<uint32_t> skips_of_slot, bool defer) {
  const Tracepoint& tp = *def;
  if (next_slot_ >= bpf::kGlobalSlot)
    return make_error(ENOSPC, "the eBPF collector holds at most " +
                                  std::to_string(bpf::kGlobalSlot) + " tracepoints per run");
  auto site = resolve_probe_site(pid, tp.address);
  if (!site)
    return site.error();

  uint32_t slot = next_slot_;
  bpf::CodegenOptions o = codegen_options(slot, &ctx, ctx.register_block_size());
  o.tsv_index = [this, &ctx](uint32_t n) { return tsv_index(n, &ctx); };
  o.emulation = emulation_site(*site, tp.address, slot);
  bpf::CodegenMaps maps{control_.get(), tsvs_.get(), stats_.get(), rings_.outer_fd(), skips_.get()};
  auto prog = bpf::generate_program(tp, maps, o);
  if (!prog)
    return prog.error();
  std::string name = "gdbtrace_tp" + std::to_string(tp.number);
  auto loaded =
      bpf::load_uprobe_program(prog->insns, name.c_str(), o.sleepable, support_.uprobe_multi);
  if (!loaded)
    return make_error(loaded.error().code,
                      "tracepoint " + std::to_string(tp.number) + ": " + loaded.error().message);

  ControlSlot& c = control(slot);
  uint64_t skips =
      skips_of_slot ? copy_skips(*skips_of_slot, slot) : mark_threads_at(pid, tp.address, slot);
  __atomic_store_n(&c.hits, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&c.skips_pending, skips, __ATOMIC_RELAXED);
  __atomic_store_n(&c.emulate, 0, __ATOMIC_RELAXED); // set_emulating_probes decides
  __atomic_store_n(&c.enabled, enabled ? 1 : 0, __ATOMIC_RELEASE);
  Probe p;
  p.emulates = o.emulation.has_value();
  if (defer) {
    p.program = std::move(*loaded);
    p.site = std::move(*site);
  } else {
    auto event = attach(*site, pid, loaded->get());
    if (!event)
      return event.error();
    p.event = std::move(*event);
    p.attached_at = ++attach_seq_;
  }
  next_slot_++;

  p.tp = tp.number;
  p.address = tp.address;
  p.slot = slot;
  p.pid = pid;
  p.def = std::move(def);
  std::vector<bool> regs = prog->registers;
  regs.resize(GT_NUM_REGS_AVX, false);
  ctx.set_register_availability(tp.number, regs);
  p.registers = register_mask(regs);
  return p;
}

// The recipe for the instruction at SITE, if this kernel lets the program carry
// it out. The bytes come from the file, not the tracee's memory, which may hold
// a debugger's int3 there.
std::optional<bpf::EmulationSite>
BpfCollector::emulation_site(const ProbeSite& site, uint64_t address, uint32_t slot) const {
  if (!emulation_available())
    return std::nullopt;
  uint8_t bytes[GDBTRACE_MAX_EMU];
  ssize_t n = pread(site.fd.get(), bytes, sizeof bytes, off_t(site.offset));
  gdbtrace_emu recipe{};
  if (n <= 0 || gt_emu_decode(bytes, uint32_t(n), &recipe) != 0 || !bpf::bpf_can_emulate(recipe))
    return std::nullopt;
  bpf::EmulationSite e;
  e.address = address;
  e.recipe = recipe;
  e.task_dr7_offset = *support_.task_dr7_offset;
  e.flag_map_fd = control_.get();
  e.flag_offset = uint32_t(slot * sizeof(ControlSlot) + offsetof(ControlSlot, emulate));
  return e;
}

// The kernel runs the programs of one address newest first (see
// keep_definition_order), so the one attached earliest runs last: only that one
// may move ip on, after every other has collected the registers as they were
// before the instruction. Flags go off before the new one goes on, so two
// programs of one address never both emulate.
void BpfCollector::set_emulating_probes() {
  std::map<std::pair<Pid, uint64_t>, const Probe*> last;
  for (const auto& p : probes_) {
    if (!p.attached_at)
      continue;
    const Probe*& l = last[{p.pid, p.address}];
    if (!l || p.attached_at < l->attached_at)
      l = &p;
  }
  auto chosen = [&](const Probe& p) {
    return p.emulates && p.attached_at && last[{p.pid, p.address}] == &p;
  };
  for (const auto& p : probes_)
    if (!chosen(p))
      __atomic_store_n(&control(p.slot).emulate, 0, __ATOMIC_RELEASE);
  for (const auto& p : probes_)
    if (chosen(p))
      __atomic_store_n(&control(p.slot).emulate, 1, __ATOMIC_RELEASE);
}

// The kernel runs the consumers of one uprobe newest first; gdbserver collects
// the tracepoints at one address in definition order, and gdb relies on it
// (`tfind tracepoint N` searches forward from the current frame). So when a
// tracepoint joins an address, every older one there (lower number) is
// attached again after it, highest number first, and its first probe retired:
// the copy starts disabled, the original is disabled before the copy takes over
// its enabled state, so a hit in flight at that instant can be missed by it,
// never collected twice. A copy that cannot be made leaves the order as it was.
void BpfCollector::keep_definition_order(const Probe& added, TraceContext& ctx) {
  std::vector<size_t> older;
  for (size_t i = 0; i < probes_.size(); i++)
    if (&probes_[i] != &added && probes_[i].pid == added.pid &&
        probes_[i].address == added.address && probes_[i].tp < added.tp)
      older.push_back(i);
  std::sort(older.begin(), older.end(),
            [&](size_t a, size_t b) { return probes_[a].tp > probes_[b].tp; });
  std::vector<std::pair<size_t, Probe>> copies;
  for (size_t i : older) {
    const Probe& o = probes_[i];
    auto copy = load_and_attach(o.pid, o.def, ctx, false, o.slot);
    if (!copy)
      break;
    copies.emplace_back(i, std::move(*copy));
  }
  if (copies.empty())
    return;
  // The originals' records name their slots, which go away: hand them over
  // now, and their dropped hits, before they are retired.
  if (!draining_)
    drain();
  account_drops();
  std::vector<UniqueFd> retired;
  std::vector<size_t> gone;
  for (auto& [i, copy] : copies) {
    Probe& o = probes_[i];
    ControlSlot& from = control(o.slot);
    ControlSlot& to = control(copy.slot);
    uint64_t enabled = __atomic_exchange_n(&from.enabled, 0, __ATOMIC_ACQ_REL);
    __atomic_store_n(&to.hits, __atomic_load_n(&from.hits, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
    __atomic_store_n(&to.enabled, enabled, __ATOMIC_RELEASE);
    // The pass-count hits moved with `hits`; the per-CPU counts stay with the slot.
    CollectorStats old = probe_stats(o);
    old.hits -= __atomic_load_n(&from.hits, __ATOMIC_RELAXED);
    replaced_stats_[{o.tp, o.address}] += old;
    copy.drops_reported = 0;
    retired.push_back(std::move(o.event));
    gone.push_back(i);
  }
  std::sort(gone.rbegin(), gone.rend());
  for (auto& [i, copy] : copies)
    probes_.push_back(std::move(copy));
  for (size_t i : gone)
    probes_.erase(probes_.begin() + long(i));
  bpf::close_concurrently(std::move(retired));
}

// Threads of PID stopped with their pc at ADDRESS (from /proc/PID/task/TID/syscall,
// "-1 sp pc" for a stopped thread outside a system call) go into the skip map.
uint64_t BpfCollector::mark_threads_at(Pid pid, uint64_t address, uint32_t slot) {
  uint64_t marked = 0;
  std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  if (!d)
    return 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.')
      continue;
    std::ifstream f(dir + "/" + e->d_name + "/syscall");
    std::string nr, sp, pc;
    if (!(f >> nr >> sp >> pc) || nr != "-1")
      continue;
    if (std::stoull(pc, nullptr, 16) != address)
      continue;
    uint64_t key = bpf::skip_key(uint32_t(atoi(e->d_name)), slot), value = address;
    if (bpf_map_update_elem(skips_.get(), &key, &value, BPF_ANY) == 0)
      marked++;
  }
  closedir(d);
  return marked;
}

// The skip marks of FROM_SLOT, copied to TO_SLOT; returns how many.
uint64_t BpfCollector::copy_skips(uint32_t from_slot, uint32_t to_slot) {
  std::vector<uint64_t> keys;
  uint64_t key = 0, prev = 0;
  bool first = true;
  while (bpf_map_get_next_key(skips_.get(), first ? nullptr : &prev, &key) == 0) {
    first = false;
    prev = key;
    if (uint32_t(key) == from_slot)
      keys.push_back(key);
  }
  uint64_t copied = 0;
  for (uint64_t k : keys) {
    uint64_t value = 0;
    if (bpf_map_lookup_elem(skips_.get(), &k, &value) != 0)
      continue;
    uint64_t to = bpf::skip_key(uint32_t(k >> 32), to_slot);
    if (bpf_map_update_elem(skips_.get(), &to, &value, BPF_ANY) == 0)
      copied++;
  }
  return copied;
}

Probe* BpfCollector::find_slot(uint32_t slot) {
  for (auto& p : probes_)
    if (p.slot == slot)
      return &p;
  return nullptr;
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
    rings_.drain([this](std::span<const uint8_t> r) { handle_record(r); });
    draining_ = false;
  }
  retire_stats();
  probes_.clear();
  run_active_ = false;
  // Whatever is left is stale.
  discard_ = true;
  if (!draining_ && rings_)
    rings_.discard();
}

// The run's counts, per location, for the status after the probes are gone.
void BpfCollector::retire_stats() {
  retired_stats_ = replaced_stats_;
  for (const auto& p : probes_)
    retired_stats_[{p.tp, p.address}] += probe_stats(p);
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
                       drain();
                       if (run_active_)
                         arm_watch();
                     });
}

void BpfCollector::handle_record(std::span<const uint8_t> record) {
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
  ctx_->append_compact_frame({data, frame.total_size()}, p->registers, p->address);
  ctx_->record_hit(p->tp); // may request a stop (pass count)
}

void BpfCollector::drain() {
  if (!rings_ || draining_)
    return;
  draining_ = true;
  rings_.drain([this](std::span<const uint8_t> r) { handle_record(r); });
  if (run_active_)
    account_drops();
  draining_ = false;
  if (!run_active_) {
    discard_ = true;
    rings_.discard();
  }
}

// Hits whose frame the full ring buffer dropped still count toward pass counts.
void BpfCollector::account_drops() {
  for (size_t i = 0; i < probes_.size() && run_active_; i++) {
    uint64_t drops = read_stats(probes_[i].slot).drops;
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
  for (auto it = probes_.begin(); it != probes_.end();) {
    if (it->tp != tp_number || it->address != address) {
      ++it;
      continue;
    }
    __atomic_store_n(&control(it->slot).enabled, 0, __ATOMIC_RELEASE);
    removed += probe_stats(*it);
    found = true;
    it = probes_.erase(it); // closing its link removes the uprobe from the tracee
  }
  if (!found)
    return make_error(ENOENT,
                      "tracepoint " + std::to_string(tp_number) + " has no eBPF probe there");
  // Copies replaced by keep_definition_order counted for the same location.
  if (auto r = replaced_stats_.find({tp_number, address}); r != replaced_stats_.end()) {
    removed += r->second;
    replaced_stats_.erase(r);
  }
  set_emulating_probes(); // the probe that emulated the instruction may be gone
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
  for (const auto& p : probes_)
    if (p.tp == tp_number && p.address == address)
      sum += probe_stats(p);
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

} // namespace

Result<std::unique_ptr<Collector>> make_bpf_collector(asio::io_context& io) {
  auto support = bpf::probe_kernel_support();
  if (!support)
    return support.error();
  auto c = std::make_unique<BpfCollector>(io, std::move(*support));
  if (auto r = c->init(); !r)
    return r.error();
  return std::unique_ptr<Collector>(std::move(c));
}

} // namespace gdbtrace
