// The jump pad's machine code: which sites a 5-byte jmp may replace (the
// displaced instruction relocated into the pad), and the pad itself, emitted
// as x86-64 bytes for one site and the tracepoints installed there.
// Pure functions (no tracee): the unit tests run emitted pads in their own process.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "common/result.h"
#include "trace/tracepoint.h"

namespace gdbtrace::jumppad {

inline constexpr unsigned kJumpLen = 5; // e9 rel32

// The instruction at a site and how to run it elsewhere.
struct SitePlan {
  std::vector<uint8_t> insn; // its bytes as found
  int disp_at = -1;          // offset of its rip-relative disp32 (-1: none)
  // A call, jmp or jcc (shared/x86/branch.h gt_branch_kind; 0: none). The pad
  // runs it as a sequence of its own that goes where the branch goes: a call
  // pushes the site's return address (so the callee returns to the program,
  // and unwinders and C++ exceptions see the program's frames), then jumps.
  uint8_t branch = 0;
  uint8_t cc = 0; // a jcc's condition
  bool pushes_return() const;
};

// Decodes the instruction starting BYTES (read from the tracee's file mapping)
// with the one x86 decoder (shared/x86) and says whether the pad can run it: at
// least kJumpLen bytes, a form the decoder knows or a call/jmp/jcc with a rel32
// or [rip+disp32] operand. The error text is check()/install()'s reason.
Result<SitePlan> plan_site(std::span<const uint8_t> bytes);

// The relocated instruction for AT (its address in the pad), given the site's
// address: a rip-relative disp32 adjusted so it names the same byte; an error
// when that is more than 2 GB away. A branch becomes a sequence that ends by
// jumping (the pad adds no jmp back after it).
Result<std::vector<uint8_t>> relocate(const SitePlan& plan, uint64_t site, uint64_t at);

// A memory range a tracepoint copies into its record after the registers:
// at ADDRESS (BASEREG = -1: gdb's absolute memrange, `collect some_global`),
// or at the value BASEREG (a gdb register number) had at the site + ADDRESS.
struct MemRange {
  int basereg = -1;
  uint64_t address = 0;
  uint32_t length = 0;
};

// A pad instruction that reads tracee memory (FAULT) and where a thread that
// faulted there goes instead (RECOVERY: marks the range unreadable, goes on
// with the next one), as offsets from the pad's first byte. The stub, the
// tracee's ptracer, keeps these per area and applies them at the SIGSEGV or
// SIGBUS stop (docs/collectors.md "Jump pad": memory).
// Bytes of RANGES packed in a record (their sum: record_slots says how many
// slots that record takes).
inline size_t memory_bytes(const std::vector<MemRange>& ranges) {
  size_t n = 0;
  for (const MemRange& r : ranges)
    n += r.length;
  return n;
}

struct FaultFixup {
  uint32_t fault = 0;
  uint32_t recovery = 0;
};

// One tracepoint at the site, as the pad runs it: its counters and switch
// (TpSlot index), and `$tsv += k` updates (index into the TSV table).
struct PadTracepoint {
  uint32_t tp_slot = 0;
  struct TsvAdd {
    uint32_t index;
    int32_t k;
  };
  // Done by the pad (a locked add each) only when it writes no record: a
  // recording tracepoint's adds are k per record or drop, added by the stub.
  std::vector<TsvAdd> tsv_adds;
  bool record = true; // write a record (a frame) per hit
  // The tracepoint's condition, compiled into the pad: false skips the rest of
  // this tracepoint (no count, no TSV update, no record, as gdbserver does).
  std::optional<AgentExpr> condition = std::nullopt;
  // Copied into the record (record_mem_offset, packed in this order), each
  // read checked: at most kMaxMemRanges, kRecordMemBytes in all.
  std::vector<MemRange> memory = {};
};

struct PadSpec {
  uint64_t site = 0; // tracepoint address
  uint64_t pad = 0;  // where the pad's first byte will be in the tracee
  uint64_t area = 0; // tracee address of the shared area (jumppad_layout.h)
  // The process's "armed" word: private memory wiped in fork children
  // (MADV_WIPEONFORK), so a child's pads skip everything and only run the
  // instruction (the child shares the rings but is not the traced process).
  uint64_t armed = 0;
  uint32_t ring_mask = 0;   // rings - 1 (a power of two)
  uint32_t slot_mask = 0;   // slots per ring - 1 (a power of two)
  uint32_t ring_stride = 0; // one ring's bytes (ring_stride(slots))
  bool rdpid = false;       // the CPU has rdpid: rdtsc + rdpid is cheaper than rdtscp
  bool sahf = false;        // the CPU has LAHF/SAHF in 64-bit mode: flags back without popfq
  SitePlan plan;
  std::vector<PadTracepoint> tps; // in definition order
};

// The pad: registers saved below the red zone, each tracepoint's switch,
// counters, TSV adds and ring record, registers restored, the relocated
// instruction, a jmp back after the site.
// FIXUPS, when given, receives the pad's faulting reads and their recovery.
Result<std::vector<uint8_t>> emit_pad(const PadSpec& spec,
                                      std::vector<FaultFixup>* fixups = nullptr);

// Whether the pad compiles condition E: straight-line or forward-branching
// arithmetic, comparisons and logic over constants and the registers the pad
// saves (rax..r15, rsp, rip, eflags), values on the thread's stack below the
// saved registers (at most kMaxConditionStack). Refused, with the reason: memory
// reads (a bad pointer must not crash the tracee), TSVs, division, loops.
inline constexpr uint32_t kMaxConditionStack = 32;
Result<void> check_condition(const AgentExpr& e);

// The 5 bytes written over the site: jmp PAD.
Result<std::array<uint8_t, kJumpLen>> site_jump(uint64_t site, uint64_t pad);

} // namespace gdbtrace::jumppad
