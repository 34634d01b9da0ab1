// The collector interface: what a hit mechanism (ptrace traps, the gdbtrace.ko
// kernel module, eBPF) must provide to the trace engine.
//
// A collector only installs probes and produces frames. Tracepoint definitions,
// the trace buffer (tfile layout), the tfind index, trace state variables,
// status and stop reasons all live in the TraceEngine. Owning objects release
// kernel attachments in their destructors.
//
// Frames are in gdb's tfile layout (abi/tframe.h); the 'R' block is
// TraceContext::register_block_size() bytes of the 'g' layout.
// Collectors that cannot read some registers (kernel collectors have no FPU
// state) still write the full block and report the registers they filled via
// TraceContext::set_register_availability().
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/register_layout.h"
#include "common/result.h"
#include "trace/compact_frame.h"
#include "trace/tracepoint.h"

namespace gdbtrace {

using Pid = int;

enum class TraceStopReason { None, Requested, BufferFull, PassCount, Error, Disconnected };

// Services the engine offers to collectors. Methods are called on the
// io_context thread (kernel collectors drain their buffers from there).
class TraceContext {
public:
  virtual ~TraceContext() = default;
  // Append one complete frame, collected by the probe at ADDRESS (the
  // tracepoint location that fired: a frame names only its tracepoint number,
  // and a number has one location per address). Returns false if the buffer is
  // full and not circular (the engine then stops the run with tfull).
  virtual bool append_frame(std::span<const uint8_t> frame, uint64_t address) = 0;
  // The same for a frame whose register blocks are compact blocks
  // (trace/compact_frame.h) of REGISTERS, as the eBPF ring records carry
  // them: the engine stores it as it is. This default hands on the tfile frame.
  virtual bool append_compact_frame(std::span<const uint8_t> frame, const RegisterMask& registers,
                                    uint64_t address);
  // The frame the next append_* call hands over hit at MONOTONIC_NS
  // (CLOCK_MONOTONIC): a collector whose records carry their hit's time
  // (kStampsHits) says so before each, and the engine stores the frames of
  // several such collectors drained together in hit order, not drain order.
  virtual void next_hit_time(uint64_t monotonic_ns) { (void)monotonic_ns; }
  virtual uint32_t register_block_size() const = 0; // 560 or 816 (i386: 312 or 440)
  // The traced process's register layout, of which register_block_size() is the 'R' block.
  virtual RegisterLayout register_layout() const {
    return {RegisterArch::Amd64, register_block_size() == GT_REGBLOCK_SIZE_AVX};
  }
  // Bytes of the trace buffer (`set trace-buffer-size`), so a kernel collector
  // can size its own staging rings from it; 0 when unknown.
  virtual size_t buffer_capacity() const { return 0; }
  // What a kernel collector sizes its staging rings from: the trace buffer's
  // size, or while the run streams to a file or the buffer is circular (its
  // frames then outgrow the buffer, for as long as the run goes on)
  // kStreamStagingBytes when larger. The rings together hold half of it.
  static constexpr size_t kStreamStagingBytes = size_t(256) << 20;
  virtual size_t staging_capacity() const { return buffer_capacity(); }
  // Whether the run's frames outlive the buffer (a stream or a circular
  // buffer): it drains for as long as it runs. A linear run ends when its
  // buffer is full, so frames a collector stages wait at no cost to the tracee.
  virtual bool unbounded_run() const { return false; }
  // Registers (bitmask over remote regnums) a collector fills in its 'R' blocks.
  virtual void set_register_availability(uint32_t tp_number, const std::vector<bool>& valid) = 0;
  // Trace state variables kept by the engine (the ptrace collector uses these;
  // kernel collectors keep their own and report through Collector::tsv_value).
  virtual std::optional<int64_t> get_tsv(uint32_t number) = 0;
  virtual void set_tsv(uint32_t number, int64_t value) = 0;
  // What a kernel collector's own copy of TSV NUMBER starts from, whenever it
  // installs: the engine's value at the run's start (tsv_keepers.cc adds up
  // what each copy added to it). By default the engine's current value.
  virtual std::optional<int64_t> tsv_seed(uint32_t number) { return get_tsv(number); }
  virtual int64_t trace_timestamp() = 0; // $trace_timestamp (µs)
  // Counts a hit toward TP_NUMBER's pass count (the pass count is the
  // tracepoint's, over all its locations); may request the tpasscount stop.
  virtual void record_hit(uint32_t tp_number) = 0;
  // A while-stepping tracepoint finished its steps for one hit: its pass count is
  // checked here (as gdbserver does), not at record_hit, so the steps are not cut off.
  virtual void while_stepping_done(uint32_t tp_number) {}
  // False once the run is over or a stop is pending: collectors skip further hits.
  virtual bool collecting() const { return true; }
  // TP_NUMBER: the tracepoint at fault for Error (terror:<text>:<tp>).
  virtual void request_stop(TraceStopReason reason, std::string error_text = {},
                            uint32_t tp_number = 0) = 0;
  virtual void console(const std::string& text) = 0; // agent printf / notices to gdb's console
  // What a collector installed for TP_NUMBER at ADDRESS, while it is installed
  // there (the tracepoint as install() was given it), for a collector that
  // must make a probe again: kept by the engine once, not copied by each
  // collector per probe (10 000 copies were ~5 MB of the stub). None once the
  // engine no longer has it.
  virtual std::optional<Tracepoint> definition(uint32_t tp_number, uint64_t address) const = 0;
};

// What only the collector sees, per tracepoint location (number, address):
// every hit (also those that produced no frame), frames lost before they
// reached the engine (a full kernel ring), hits it saw after the run stopped
// or a stop was pending (tfull, tpasscount, terror: the probe was still in
// until the engine removed it; no frame is made for them), evaluation errors.
// Frames and bytes in the trace buffer, and frames the buffer refused, are the
// engine's to count (TracepointReport), so that for every location
//   hits = frames + drops + after_stop
// (a hit whose actions failed to evaluate also counts in errors, and made no frame).
struct CollectorStats {
  uint64_t hits = 0, drops = 0, errors = 0;
  uint64_t after_stop = 0;
  uint64_t emulated = 0; // hits whose probed instruction the probe emulated (no single-step)
  CollectorStats& operator+=(const CollectorStats& o) {
    hits += o.hits;
    emulated += o.emulated;
    drops += o.drops;
    errors += o.errors;
    after_stop += o.after_stop;
    return *this;
  }
};

class Collector {
public:
  // What kind of collector this is, for the engine's decisions (never compare
  // name(), which is for people and for `monitor gdbtrace backend NAME`).
  enum Capability : unsigned {
    // Probes are kernel uprobes: the int3 at a probed address belongs to the
    // kernel, which would swallow the trap of a gdb software breakpoint there.
    kProbesInKernel = 1u << 0,
    // uninstall() removes one tracepoint's probe during a run.
    kRemovesOneProbe = 1u << 1,
    // Probes are code patched into the tracee (the jump pad's jmp at the
    // site): no other collector's int3 may share the address.
    kPatchesCode = 1u << 2,
    // Serves only fast tracepoints (`ftrace`): under `backend auto` the engine
    // passes it over for the others without a console line.
    kFastOnly = 1u << 3,
    // Collects from i386 (gcc -m32) processes: frames in the i386 'R' layout,
    // expressions over i386 register numbers. The kernel collectors do not
    // (their programs and recipes know only the x86-64 register file and
    // instruction set), so the engine passes such tracepoints on.
    kI386Processes = 1u << 4,
    // Every frame's hit time reaches the engine (TraceContext::next_hit_time)
    // before the frame: the eBPF stamps (bpf_ktime_get_ns) and the pads'
    // TSC stamps. The module's records carry a sequence number, not a time.
    kStampsHits = 1u << 5,
  };

  virtual ~Collector() = default;
  virtual std::string name() const = 0; // "module", "ebpf", "ptrace"
  virtual unsigned caps() const = 0;    // Capability bits
  // Whether this collector can serve TP; the error text says why not
  // (e.g. "while-stepping needs the ptrace collector"). Cheap (no program is
  // generated, nothing touches the kernel): the engine calls it before
  // install(), which need not repeat it, and moves on to the next collector
  // when either fails.
  virtual Result<void> check(const Tracepoint& tp) const = 0;
  // Install TP in process PID (probes armed at once; called at QTStart, or
  // later for tracepoints added during a run). A disabled TP (tp.enabled false)
  // is installed but must not collect until set_enabled(true).
  virtual Result<void> install(Pid pid, const Tracepoint& tp, TraceContext& ctx) = 0;
  // QTStart installs every tracepoint between these two calls. A collector may
  // arm its probes only at the end (the kernel runs the uprobe consumers of one
  // address newest first: armed in descending number, they collect in
  // definition order, as gdbserver does). A failure at the end fails the start;
  // remove_all() ends a batch too.
  virtual void begin_install_batch() {}
  virtual Result<void> end_install_batch() { return ok(); }
  virtual Result<void> set_enabled(uint32_t tp_number, uint64_t address, bool enabled) = 0;
  // Remove every probe (QTStop, QTinit, process exit). Must leave no trace in the tracee.
  virtual void remove_all() = 0;
  // Remove TP_NUMBER's probe at ADDRESS during a run, after handing its frames
  // to the engine (the engine moves the tracepoint to another collector).
  // Returns the probe's counts, which stats() no longer includes. Only
  // collectors with kRemovesOneProbe implement it.
  virtual Result<CollectorStats> uninstall(uint32_t tp_number, uint64_t address) {
    return make_error(EOPNOTSUPP, name() + " cannot remove one probe during a run");
  }
  // Move frames produced so far into the engine (kernel collectors drain their buffer).
  virtual void drain() {}
  // Every thread of PID is stopped (a stop gdb is about to hear of): a
  // collector that had to leave code patched at a stop made while threads ran
  // (a full buffer during a drain) puts it back now.
  virtual void process_stopped(Pid pid) { (void)pid; }
  // The counts of TP_NUMBER's probe at ADDRESS (one location; gdb sums them).
  virtual CollectorStats stats(uint32_t tp_number, uint64_t address) const = 0;
  // Frames of this run (or the last) lost for want of room in a staging ring,
  // by CPU (index: CPU number), for a collector that stages frames per CPU;
  // empty when it does not know. Their sum is part of stats()' drops.
  virtual std::vector<uint64_t> drops_by_cpu() const { return {}; }
  // Current value of a TSV the collector keeps itself (kernel side), if any.
  virtual std::optional<int64_t> tsv_value(uint32_t number) const { return std::nullopt; }
  // One line for `monitor gdbtrace backend` / status (e.g. "eBPF: kernel single-steps, no reg
  // writes").
  virtual std::string describe() const { return name(); }
};

} // namespace gdbtrace
