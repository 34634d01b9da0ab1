// Translation of one tracepoint (condition + collection actions) into a BPF
// program for a uprobe (BPF_PROG_TYPE_KPROBE, context = the user's pt_regs).
//
// The program: check the enabled flag, evaluate the condition, count the hit
// (atomically; beyond the pass count nothing is collected), reserve a frame of
// the tracepoint's maximum size in the ring buffer, write the blocks in action
// order in gdb's tfile layout (registers in the compact block of trace/compact_frame.h),
// store the real size in the header, submit.
// Agent expressions are compiled with a static stack layout (the AX verifier
// proved one stack depth per instruction and AgentExpr::depth holds it): AX
// slot i lives at a fixed BPF stack offset. Programs with backward jumps, printf or registers a
// uprobe cannot see are refused, so the engine falls back to ptrace for them.
#pragma once

#include <linux/bpf.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bpf/bpf_emulate.h"
#include "common/result.h"
#include "trace/tracepoint.h"

namespace gdbtrace::bpf {

struct CodegenMaps {
  int control_fd = -1;
  int tsv_fd = -1;
  int stats_fd = -1;
  int ringbuf_fd = -1;
  int skip_fd = -1;     // HASH skip_key -> address (see bpf_layout.h)
  int overflow_fd = -1; // each CPU's second ring, for a record its first has no room for
                        // (PerCpuRings); -1: none, a full first ring drops
};

struct CodegenOptions {
  uint32_t slot = 0; // ControlSlot / StatsSlot index
  // The slot is not a constant of the program but the attach cookie of the
  // uprobe_multi link that runs it (bpf_get_attach_cookie): every probe whose
  // tracepoint generates the same code loads one program, whatever its slot and
  // number (the number comes from ControlSlot::tp_number). Not with emulation.
  bool slot_from_cookie = false;
  uint32_t regblock_size = 816; // TraceContext::register_block_size()
  // TSV number -> index in the tsv map; nullopt when no index is left.
  std::function<std::optional<uint32_t>(uint32_t)> tsv_index;
  // TSV number the engine uses for $trace_timestamp, if any (read as
  // bpf_ktime_get_ns()/1000: CLOCK_MONOTONIC µs).
  std::optional<uint32_t> timestamp_tsv;
  // Added to the monotonic µs so $trace_timestamp matches the engine's clock
  // (TraceContext::trace_timestamp() - CLOCK_MONOTONIC µs, taken at install).
  int64_t timestamp_offset_us = 0;
  // Unconsumed ring-buffer bytes from which a frame wakes the reader (below
  // that, frames wait for the engine's periodic drain).
  uint32_t wakeup_bytes = 1u << 20;
  // The same for an overflow ring (CodegenMaps::overflow_fd), used while the
  // stub defers draining (bpf_layout.h kDeferWakeOffset); otherwise a frame
  // there wakes the reader at once.
  uint32_t overflow_wakeup_bytes = 1u << 20;
  // The program will be loaded sleepable (BPF_F_SLEEPABLE).
  bool sleepable = false;
  // Offset of thread.fsbase in task_struct (from vmlinux BTF); nullopt: fs_base unavailable.
  std::optional<uint32_t> task_fsbase_offset;
  // Emulate the probed instruction at the end of every hit (Linux 6.19+; see
  // bpf_emulate.h); nullopt: the kernel single-steps it.
  std::optional<EmulationSite> emulation;
};

struct Program {
  std::vector<bpf_insn> insns;
  uint32_t frame_max = 0;      // ring-buffer reservation per hit
  std::vector<bool> registers; // remote regnums the 'R' block fills
  // Remote regnums of the record's compact register block, in order (trace/compact_frame.h).
  std::vector<unsigned> compact_registers;
};

// pt_regs offset of remote register REGNO, or -1 when a uprobe cannot read it.
int pt_regs_offset(unsigned regno);

// Registers the generated program can read (pt_regs + fs_base when known).
bool register_available(unsigned regno, const CodegenOptions& opts);

// What the generator refuses, found without generating (cheap enough for
// Collector::check): while-stepping, agent printf, loops, expressions deeper
// than the BPF stack holds. Limits that only generation meets (frame size,
// room for TSVs, registers a uprobe cannot see) fail generate_program.
Result<void> check_tracepoint(const Tracepoint& tp);

// Runs check_tracepoint() first.
Result<Program> generate_program(const Tracepoint& tp, const CodegenMaps& maps,
                                 const CodegenOptions& opts);

} // namespace gdbtrace::bpf
