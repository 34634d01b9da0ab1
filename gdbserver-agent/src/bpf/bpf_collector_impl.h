// The eBPF collector's inside, shared by its files: an installed probe and the
// collector class. bpf_collector.cc sets up, loads and attaches;
// bpf_collector_sites.cc handles probes that share a site or must be
// re-attached in definition order and the threads a probe resumes;
// bpf_collector_records.cc drains the rings and keeps the counts. Only
// bpf_collector*.cc include this; the rest of the stub sees make_bpf_collector().
#pragma once

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <asio/posix/stream_descriptor.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <dirent.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "abi/amd64_regs.h"
#include "ax/ax.h"
#include "bpf/bpf_codegen.h"
#include "bpf/bpf_collector.h"
#include "bpf/bpf_layout.h"
#include "bpf/bpf_probe_index.h"
#include "bpf/bpf_rings.h"
#include "bpf/bpf_support.h"
#include "common/unique_fd.h"
#include "trace/collector_probe_site.h"
#include "trace/compact_frame.h"
#include "trace/frame.h"

namespace gdbtrace::bpf_collector_internal {

using bpf::ControlSlot;
using bpf::StatsSlot;

// gdbserver's (and the engine's) builtin $trace_timestamp.
constexpr uint32_t kTimestampTsv = 1;

// Each CPU's first ring and overflow ring (0: none), in bytes, for a run
// staging BUFFER bytes on NCPU CPUs (bpf_collector.cc).
struct RingSizes {
  size_t first = 0, overflow = 0;
  bool operator==(const RingSizes&) const = default;
};
RingSizes ring_sizes_for(size_t buffer, size_t ncpu);
int64_t monotonic_us();

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
  bool pass_count = false; // its tracepoint has a pass count
  // Loaded, to be attached at the end of the install batch: the program, and
  // the file (shared by the batch's probes in one file: an fd each would
  // double the fds a batch of thousands holds) with the probe's offset in it.
  std::shared_ptr<const UniqueFd> program; // possibly shared (shared_programs_)
  std::shared_ptr<const ProbeSite> file;
  uint64_t offset = 0;
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
  unsigned caps() const override { return kProbesInKernel | kRemovesOneProbe | kStampsHits; }
  Result<void> check(const Tracepoint& tp) const override;
  Result<void> install(Pid pid, const Tracepoint& tp, TraceContext& ctx) override;
  void begin_install_batch() override { batch_ = true; }
  Result<void> end_install_batch() override;
  Result<void> set_enabled(uint32_t tp_number, uint64_t address, bool enabled) override;
  void remove_all() override;
  Result<CollectorStats> uninstall(uint32_t tp_number, uint64_t address) override;
  void drain() override;
  CollectorStats stats(uint32_t tp_number, uint64_t address) const override;
  std::vector<uint64_t> drops_by_cpu() const override;
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
  Result<UniqueFd> attach(const ProbeSite& file, uint64_t offset, Pid pid, int prog_fd,
                          uint32_t slot) const;
  Result<std::shared_ptr<const UniqueFd>>
  program_for(const bpf::Program& prog, const bpf::CodegenOptions& o, uint32_t tp_number);
  std::shared_ptr<const ProbeSite> batch_file(ProbeSite site);
  Result<Probe> load_and_attach(Pid pid, const Tracepoint& tp, TraceContext& ctx, bool enabled,
                                std::optional<uint32_t> skips_of_slot, bool defer = false);
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
  bool update_deferral();
  bool past_mark() const;
  void drain_past_mark();
  void handle_record(std::span<const uint8_t> record, uint64_t stamp);
  void account_drops();
  StatsSlot read_stats(uint32_t slot) const;
  // Adds SLOT's drops on each CPU to OUT (grown to the CPU count).
  void add_cpu_drops(uint32_t slot, std::vector<uint64_t>& out) const;
  CollectorStats probe_stats(const Probe& p) const;
  Probe* find_slot(uint32_t slot);
  static ProbeKeys keys_of(const Probe& p);
  void reindex();
  // Probe I leaves the list (its link closes: the uprobe leaves the tracee); the last probe takes
  // its position.
  void remove_probe(size_t i);
  void set_emulating_at(Pid pid, uint64_t address);
  void retire_stats();

  asio::io_context& io_;
  bpf::KernelSupport support_;
  UniqueFd control_, tsvs_, stats_, skips_;
  Mapping control_mem_, tsv_mem_;
  bpf::PerCpuRings rings_;
  std::unique_ptr<asio::posix::stream_descriptor> watch_;
  std::unique_ptr<asio::steady_timer> retry_; // drain_past_mark after a drain that took nothing
  size_t last_drained_ = 0;                   // records the last drain() took
  bool deferring_ = false;                    // the program's kDeferWakeOffset flag
  uint64_t deferred_wakes_ = 0;               // wakes of the run left undrained (status)
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);

  TraceContext* ctx_ = nullptr;
  std::vector<Probe> probes_;
  // Positions in probes_ by slot (a lookup per record), by location (per
  // status row), by site, and those with a pass count: kept with every change of
  // probes_ (push_back + index_.add, remove_probe, or reindex()).
  // The slot table is dense (slots are small numbers, below kMaxProbes): one load per
  // record instead of a hash lookup, which at 10 000 probes missed the cache.
  ProbeIndex index_;
  uint64_t drops_seen_ = 0; // the run's drop count (global slot) account_drops last saw
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
  std::vector<uint64_t> retired_cpu_drops_; // by CPU (not those of replaced probes)
  std::map<uint32_t, int64_t> retired_tsvs_;
  // Counts of probes of this run replaced by a copy (keep_definition_order),
  // and hits whose record arrived after the run stopped.
  std::map<Location, CollectorStats> replaced_stats_;
  // Programs loaded this run, by their instructions: probes whose tracepoints
  // generate the same code (the slot and number come from the attach cookie)
  // share one, verified once, one copy of its code hot in the caches.
  std::map<std::string, std::shared_ptr<const UniqueFd>> shared_programs_;
  // $trace_timestamp - CLOCK_MONOTONIC µs, taken at the run's start.
  int64_t timestamp_offset_us_ = 0;
  // The files of the install batch's probes, by device and inode (batch_file).
  std::map<std::pair<dev_t, ino_t>, std::shared_ptr<const ProbeSite>> batch_files_;
};

} // namespace gdbtrace::bpf_collector_internal
