#include "bpf/bpf_collector_impl.h"

namespace gdbtrace::bpf_collector_internal {

// Each CPU's rings for a trace buffer of BUFFER bytes: the rings stage frames
// until the stub's next drain (a wake-up at half of the first ring, else the
// engine's one-second heartbeat), so together they hold half the buffer,
// within [1 MB, 128 MB] per CPU (1 MB: above the largest frame; a big buffer
// gets big rings because a stub starved of CPU on a busy machine falls behind a
// tracee producing ~800 MB/s, and what the rings cannot hold is dropped). A
// streamed or circular run sizes them from TraceContext::kStreamStagingBytes
// instead when that is larger (64 MB per CPU on two CPUs, 128 MB whatever the
// CPU count): its frames do not stop at the buffer's size, and on a loaded
// machine the stub waits for a CPU far longer than it needs to drain.
//
// A share above kHotRingBytes is split: a first ring of kHotRingBytes, where
// every record goes while the stub keeps up, and an overflow ring of the
// whole share for when it does not (bpf_rings.h). A `collect $regs` hit cost
// 484-497 ns with 4 MB rings, 552 with 16 MB and 557-569 with 64 MB (tracefs
// floor ~450; docs/benchmarks.md): the records of a large ring miss the cache.
// GDBTRACE_BPF_RINGBUF_MB sets one ring per CPU, no overflow.
constexpr size_t kHotRingBytes = size_t(4) << 20;

RingSizes ring_sizes_for(size_t buffer, size_t ncpu) {
  auto pow2_ceil = [](size_t n) {
    size_t p = 1;
    while (p < n)
      p <<= 1;
    return p;
  };
  if (const char* mb = getenv("GDBTRACE_BPF_RINGBUF_MB"))
    if (size_t n = size_t(atol(mb)); n > 0)
      return {pow2_ceil(n) << 20, 0};
  size_t want = buffer / 2 / std::max<size_t>(ncpu, 1);
  size_t p = pow2_ceil(want);
  if (p > want)
    p >>= 1; // the power of two at or below the share
  size_t share = std::clamp<size_t>(p, size_t(1) << 20, size_t(128) << 20);
  if (share <= kHotRingBytes)
    return {share, 0};
  return {kHotRingBytes, share};
}

int64_t monotonic_us() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

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
  RingSizes sizes = ring_sizes_for(ctx.staging_capacity(), ncpu);
  if (rings_ && RingSizes{rings_.ring_bytes(), rings_.overflow_bytes()} == sizes)
    return ok();
  watching_ = false;
  watch_.reset(); // cancels a pending wait; its handler sees the error and returns
  rings_ = {};
  auto rings = bpf::PerCpuRings::create(sizes.first, sizes.overflow);
  if (!rings)
    return make_error(rings.error().code, rings.error().message +
                                              " (rings sized from set trace-buffer-size or a "
                                              "stream, or GDBTRACE_BPF_RINGBUF_MB per CPU)");
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
      ") + generated BPF program " +
      (support_.uprobe_multi ? "per distinct tracepoint code, shared through the attach cookie"
                             : "per tracepoint") +
      " (Linux " + support_.kernel_release + "); ";
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
  if (rings_ && rings_.overflow_bytes())
    s += "; per-CPU rings of " + std::to_string(rings_.ring_bytes() >> 10) + " KB and, when one " +
         "is full, of " + std::to_string(rings_.overflow_bytes() >> 10) + " KB (" +
         std::to_string(rings_.ring_count()) + " rings)";
  else if (rings_)
    s += "; " + std::to_string(rings_.ring_count()) + " per-CPU rings of " +
         std::to_string(rings_.ring_bytes() >> 10) + " KB";
  if (deferred_wakes_)
    s += "; " + std::to_string(deferred_wakes_) +
         " ring wake-ups of the run left the frames staged (no idle CPU to drain on)";
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
  o.overflow_wakeup_bytes = uint32_t(rings_.overflow_bytes() / 2);
  if (ctx)
    o.timestamp_offset_us = timestamp_offset_us_; // one value a run: programs stay shareable
  return o;
}

// Cheap: what the code generator refuses without generating. The program is
// generated once, by install(); what only generation finds (frame size, room
// for TSVs, registers a uprobe cannot see) fails there, and the engine moves on
// to the next collector all the same.
Result<void> BpfCollector::check(const Tracepoint& tp) const {
  if (auto r = bpf::check_tracepoint(tp); !r)
    return r;
  if (probes_.size() >= bpf::kGlobalSlot)
    return make_error(ENOSPC, "the eBPF collector holds at most " +
                                  std::to_string(bpf::kGlobalSlot) + " tracepoints");
  return ok();
}

void BpfCollector::start_run(TraceContext& ctx) {
  // Only the slots the last run used, and the run's own: the rest were never
  // written (load_and_attach clears each slot's per-CPU counters as it takes it).
  memset(control_mem_.get(), 0, next_slot_ * sizeof(ControlSlot));
  memset(&control(bpf::kGlobalSlot), 0, sizeof(ControlSlot));
  memset(tsv_mem_.get(), 0, bpf::kMaxTsvs * 8);
  tsv_slots_.clear();
  retired_stats_.clear();
  retired_tsvs_.clear();
  replaced_stats_.clear();
  next_slot_ = 0;
  ctx_ = &ctx;
  timestamp_offset_us_ = ctx.trace_timestamp() - monotonic_us();
  drops_seen_ = 0;
  deferring_ = false; // the flag was cleared with the global slot
  deferred_wakes_ = 0;
  run_active_ = true;
  discard_ = false;
  // Skips left over from the last run (threads that never resumed there).
  uint64_t key = 0;
  while (bpf_map_get_next_key(skips_.get(), nullptr, &key) == 0)
    if (bpf_map_delete_elem(skips_.get(), &key) != 0)
      break;
}

// Index of TSV NUMBER in the map; the first use in a run seeds it with the
// engine's value at the run's start (TraceContext::tsv_seed).
std::optional<uint32_t> BpfCollector::tsv_index(uint32_t number, TraceContext* ctx) {
  if (auto it = tsv_slots_.find(number); it != tsv_slots_.end())
    return it->second;
  if (tsv_slots_.size() >= bpf::kMaxTsvs)
    return std::nullopt;
  uint32_t index = uint32_t(tsv_slots_.size());
  tsv_slots_[number] = index;
  int64_t initial = ctx ? ctx->tsv_seed(number).value_or(0) : 0;
  __atomic_store_n(tsv_cell(index), initial, __ATOMIC_RELAXED);
  return index;
}

// SITE's file as the install batch holds it: one open file for all its probes
// there (same device and inode: the very file the resolver checked).
std::shared_ptr<const ProbeSite> BpfCollector::batch_file(ProbeSite site) {
  struct stat st {};
  if (fstat(site.fd.get(), &st) != 0)
    return std::make_shared<const ProbeSite>(std::move(site));
  auto& file = batch_files_[{st.st_dev, st.st_ino}];
  if (!file)
    file = std::make_shared<const ProbeSite>(std::move(site));
  return file;
}

// The link's cookie is SLOT (for programs generated with slot_from_cookie).
Result<UniqueFd> BpfCollector::attach(const ProbeSite& file, uint64_t offset, Pid pid, int prog_fd,
                                      uint32_t slot) const {
  // uprobe_path: the file the resolver opened and checked, not a path that
  // could name another file by now.
  if (support_.uprobe_multi)
    return bpf::attach_uprobe_link(prog_fd, file.fd_path(), offset, pid, file.path, slot);
  perf_event_attr attr{};
  attr.size = sizeof(attr);
  attr.type = uint32_t(support_.uprobe_pmu_type);
  // uprobe_path: the file the resolver opened and checked, not a path that
  // could name another file by now.
  std::string path = file.fd_path();
  attr.config1 = uint64_t(uintptr_t(path.c_str()));
  attr.config2 = offset; // probe_offset
  // pid filter: the kernel matches the uprobe against the process's mm, so
  // every thread of PID hits it and no other process does.
  int fd = int(syscall(SYS_perf_event_open, &attr, pid, -1, -1, PERF_FLAG_FD_CLOEXEC));
  if (fd < 0)
    return make_error(errno, bpf::explain_errno(errno, "uprobe on " + file.path + " offset " +
                                                           std::to_string(offset)));
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
  auto probe = load_and_attach(pid, tp, ctx, tp.enabled, std::nullopt, batch_);
  if (!probe)
    return probe.error();
  probes_.push_back(std::move(*probe));
  index_.add(keys_of(probes_.back()));
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
  batch_files_.clear(); // the probes hold them until attached
  std::vector<Probe*> pending;
  for (auto& p : probes_)
    if (p.program)
      pending.push_back(&p);
  std::stable_sort(pending.begin(), pending.end(),
                   [](const Probe* a, const Probe* b) { return a->tp > b->tp; });
  for (Probe* p : pending) {
    auto event = attach(*p->file, p->offset, p->pid, p->program->get(), p->slot);
    if (!event)
      return make_error(event.error().code,
                        "tracepoint " + std::to_string(p->tp) + ": " + event.error().message);
    p->event = std::move(*event);
    p->attached_at = ++attach_seq_;
    p->program.reset(); // the link holds the program
    p->file.reset();
  }
  set_emulating_probes();
  return ok();
}

// Generates, loads and (unless DEFER) attaches TP's program in a new slot,
// ENABLED or not.
// Threads that sit at the address skip their first hit (see mark_threads_at),
// or, for a copy of a probe, those that the probe in SKIPS_OF_SLOT still skips.
Result<Probe> BpfCollector::load_and_attach(Pid pid, const Tracepoint& tp, TraceContext& ctx,
                                            bool enabled, std::optional<uint32_t> skips_of_slot,
                                            bool defer) {
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
  // An emulating program carries its site's instruction: it is that probe's own.
  o.slot_from_cookie = support_.uprobe_multi && !o.emulation;
  bpf::CodegenMaps maps{control_.get(),    tsvs_.get(),  stats_.get(),
                        rings_.outer_fd(), skips_.get(), rings_.overflow_fd()};
  auto prog = bpf::generate_program(tp, maps, o);
  if (!prog)
    return prog.error();
  auto loaded = program_for(*prog, o, tp.number);
  if (!loaded)
    return loaded.error();

  // The slot's per-CPU counters start from zero (a slot is taken once a run).
  std::vector<uint8_t> zeros(size_t(libbpf_num_possible_cpus()) * sizeof(StatsSlot));
  bpf_map_update_elem(stats_.get(), &slot, zeros.data(), BPF_ANY);
  ControlSlot& c = control(slot);
  uint64_t skips =
      skips_of_slot ? copy_skips(*skips_of_slot, slot) : mark_threads_at(pid, tp.address, slot);
  __atomic_store_n(&c.hits, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&c.drops, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&c.skips_pending, skips, __ATOMIC_RELAXED);
  __atomic_store_n(&c.emulate, 0, __ATOMIC_RELAXED); // set_emulating_probes decides
  c.slot = slot;
  c.tp_number = tp.number;
  __atomic_store_n(&c.enabled, enabled ? 1 : 0, __ATOMIC_RELEASE);
  Probe p;
  p.emulates = o.emulation.has_value();
  if (defer) {
    p.program = std::move(*loaded);
    p.offset = site->offset;
    p.file = batch_file(std::move(*site));
  } else {
    auto event = attach(*site, site->offset, pid, (*loaded)->get(), slot);
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
  p.pass_count = tp.pass_count != 0;
  std::vector<bool> regs = prog->registers;
  regs.resize(GT_NUM_REGS_AVX, false);
  ctx.set_register_availability(tp.number, regs);
  p.registers = register_mask(regs);
  return p;
}

// PROG loaded: the run's program of the same instructions when there is one
// (slot_from_cookie), else a new one, kept for the next probes of that code.
Result<std::shared_ptr<const UniqueFd>> BpfCollector::program_for(const bpf::Program& prog,
                                                                  const bpf::CodegenOptions& o,
                                                                  uint32_t tp_number) {
  std::string key;
  if (o.slot_from_cookie) {
    key.assign(reinterpret_cast<const char*>(prog.insns.data()),
               prog.insns.size() * sizeof(prog.insns[0]));
    if (auto it = shared_programs_.find(key); it != shared_programs_.end())
      return it->second;
  }
  std::string name = "gdbtrace_tp" + std::to_string(tp_number);
  auto loaded =
      bpf::load_uprobe_program(prog.insns, name.c_str(), o.sleepable, support_.uprobe_multi);
  if (!loaded)
    return make_error(loaded.error().code,
                      "tracepoint " + std::to_string(tp_number) + ": " + loaded.error().message);
  auto fd = std::make_shared<const UniqueFd>(std::move(*loaded));
  if (o.slot_from_cookie)
    shared_programs_.emplace(std::move(key), fd);
  return fd;
}

} // namespace gdbtrace::bpf_collector_internal

namespace gdbtrace {

using bpf_collector_internal::BpfCollector;

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
