// Tracepoint -> BPF program. See bpf_codegen.h for the shape of the program;
// this file holds the program's pieces in the order they run.
#include <cstring>

#include "bpf/bpf_codegen_generator.h"
#include "trace/compact_frame.h"

namespace gdbtrace::bpf {
namespace codegen {

void Generator::read_user(const std::function<void()>& args) {
  args();
  a_.emit(call(BPF_FUNC_probe_read_user));
  if (!opts_.sleepable)
    return;
  int done = a_.new_label();
  a_.jump(jmp_imm(BPF_JEQ, R0, 0, 0), done);
  args();
  a_.emit(call(BPF_FUNC_copy_from_user));
  a_.bind(done);
}

void Generator::store_const(int16_t off, uint64_t v) {
  int64_t s = int64_t(v);
  if (s >= INT32_MIN && s <= INT32_MAX) {
    a_.emit(st_imm(BPF_DW, R10, off, int32_t(s)));
  } else {
    a_.emit(ld_imm64(R0, v));
    a_.emit(stx(BPF_DW, R10, off, R0));
  }
}

void Generator::load_const(uint8_t dst, uint64_t v) {
  int64_t s = int64_t(v);
  if (s >= INT32_MIN && s <= INT32_MAX)
    a_.emit(mov64_imm(dst, int32_t(s)));
  else
    a_.emit(ld_imm64(dst, v));
}

Result<Program> Generator::run() {
  if (auto r = check_tracepoint(tp_); !r)
    return r.error();
  if (opts_.slot_from_cookie && opts_.emulation)
    return refuse("a program shared through the attach cookie cannot emulate (internal)");
  exit_ = a_.new_label();
  drop_ = a_.new_label();
  cond_error_ = a_.new_label();
  action_error_ = a_.new_label();
  error_common_ = a_.new_label();

  prologue();
  if (tp_.has_condition) {
    if (auto r = condition(); !r)
      return r.error();
  }
  count_hit_and_reserve();
  for (const auto& act : tp_.actions)
    if (auto r = action(act); !r)
      return r.error();
  finish_frame();
  error_paths();

  if (out_.frame_max > kMaxFrameSize)
    return refuse("a frame would need " + std::to_string(out_.frame_max) + " bytes (limit " +
                  std::to_string(kMaxFrameSize) + ")");
  for (size_t at : reserve_at_)
    a_.patch(at, mov64_imm(R2, int32_t(kFrame + out_.frame_max)));
  // A record: 8-byte ring header + stamp + frame, rounded up to 8.
  a_.patch(wake_window_at_,
           mov64_imm(R3, int32_t((BPF_RINGBUF_HDR_SZ + kFrame + out_.frame_max + 7) & ~7u)));
  if (!a_.finish(out_.insns))
    return refuse("generated program too large (jump out of range)");
  return std::move(out_);
}

// r9 = &control[slot]: a constant address, or with slot_from_cookie the control
// map plus the attach cookie's slot (masked, so the verifier sees it in bounds).
// Clobbers r0-r5.
void Generator::load_control_slot() {
  if (!opts_.slot_from_cookie) {
    a_.emit(ld_map_value(R9, maps_.control_fd, opts_.slot * sizeof(ControlSlot)));
    return;
  }
  static_assert(sizeof(ControlSlot) == 64 && (kMaxProbes & (kMaxProbes - 1)) == 0);
  a_.emit(mov64_reg(R1, R6));
  a_.emit(call(BPF_FUNC_get_attach_cookie));
  a_.emit(alu64_imm(BPF_AND, R0, int32_t(kMaxProbes - 1)));
  a_.emit(alu64_imm(BPF_LSH, R0, 6));
  a_.emit(ld_map_value(R9, maps_.control_fd, 0));
  a_.emit(alu64_reg(BPF_ADD, R9, R0));
}

// DST = this probe's slot. With slot_from_cookie it is read through r9, so
// only where r9 still holds the control slot (memory blocks reuse r9; the one
// use after them, emulation, is never compiled with slot_from_cookie).
void Generator::load_slot(uint8_t dst) {
  if (opts_.slot_from_cookie)
    a_.emit(ldx(BPF_W, dst, R9, offsetof(ControlSlot, slot)));
  else
    a_.emit(mov64_imm(dst, int32_t(opts_.slot)));
}

// The tracepoint number, SIZE bytes at R7+OFF (the record); as load_slot.
void Generator::store_tp_number(uint8_t size, int16_t off) {
  if (!opts_.slot_from_cookie) {
    a_.emit(st_imm(size, R7, off, int32_t(size == BPF_H ? tp_.number & 0xffff : tp_.number)));
    return;
  }
  a_.emit(ldx(BPF_W, R1, R9, offsetof(ControlSlot, tp_number)));
  a_.emit(stx(size, R7, off, R1));
}

// r6 = pt_regs, r9 = &control[slot]; leave when disabled.
void Generator::prologue() {
  out_.frame_max = kHeader;
  a_.emit(mov64_reg(R6, R1));
  load_control_slot();
  a_.emit(ldx(BPF_DW, R0, R9, offsetof(ControlSlot, enabled)));
  a_.jump(jmp_imm(BPF_JEQ, R0, 0, 0), exit_);
  a_.emit(ld_map_value(R1, maps_.control_fd, kStopFlagOffset));
  a_.emit(ldx(BPF_DW, R0, R1, 0));
  a_.jump(jmp_imm(BPF_JNE, R0, 0, 0), exit_); // a pass count ended the run
  skip_resumed_thread();
}

// The first hit of a thread that was stopped at this address when the probe
// was installed is the resumption gdb steps over: not a hit.
void Generator::skip_resumed_thread() {
  int no_skip = a_.new_label();
  a_.emit(ldx(BPF_DW, R0, R9, offsetof(ControlSlot, skips_pending)));
  a_.jump(jmp_imm(BPF_JEQ, R0, 0, 0), no_skip);
  a_.emit(call(BPF_FUNC_get_current_pid_tgid));
  a_.emit(alu64_imm(BPF_LSH, R0, 32)); // tid in the high half, slot in the low half
  load_slot(R1);
  a_.emit(alu64_reg(BPF_OR, R0, R1));
  a_.emit(stx(BPF_DW, R10, kKey, R0));
  a_.emit(ld_map_fd(R1, maps_.skip_fd));
  a_.emit(mov64_reg(R2, R10));
  a_.emit(alu64_imm(BPF_ADD, R2, kKey));
  a_.emit(call(BPF_FUNC_map_delete_elem));
  a_.jump(jmp_imm(BPF_JNE, R0, 0, 0), no_skip); // not this thread
  a_.emit(mov64_imm(R1, -1));
  a_.emit(atomic64(BPF_ADD, R9, offsetof(ControlSlot, skips_pending), R1));
  a_.ja(exit_);
  a_.bind(no_skip);
}

Result<void> Generator::condition() {
  int done = a_.new_label();
  if (auto r = expression(tp_.condition, true, done); !r)
    return r;
  a_.bind(done);
  a_.jump(jmp_imm(BPF_JEQ, R0, 0, 0), exit_);
  return ok();
}

// Count the hit (condition true); beyond the pass count collect nothing: the
// engine stops the run when it sees the pass-count-th frame.
void Generator::count_hit_and_reserve() {
  a_.emit(st_imm(BPF_DW, R10, kWake, 0));
  if (tp_.pass_count == 0) {
    // No pass count: count in this CPU's stats slot, so threads hitting the
    // tracepoint on several CPUs do not bounce the control slot's cache line.
    stats_add(offsetof(StatsSlot, hits));
  } else {
    a_.emit(mov64_imm(R1, 1));
    a_.emit(atomic64(BPF_ADD | BPF_FETCH, R9, offsetof(ControlSlot, hits), R1));
    // Past the pass count the tracepoint is retired: take the hit back out of
    // the count (gdb's "already hit N times" stops at the pass count) and leave.
    int counting = a_.new_label(), retired = a_.new_label();
    if (tp_.pass_count <= uint64_t(INT32_MAX)) {
      a_.jump(jmp_imm(BPF_JGE, R1, int32_t(tp_.pass_count), 0), retired);
    } else {
      a_.emit(ld_imm64(R2, tp_.pass_count));
      a_.jump(jmp_reg(BPF_JGE, R1, R2, 0), retired);
    }
    a_.jump(ja(0), counting);
    a_.bind(retired);
    a_.emit(mov64_imm(R1, -1));
    a_.emit(atomic64(BPF_ADD, R9, offsetof(ControlSlot, hits), R1));
    a_.jump(ja(0), exit_);
    a_.bind(counting);
    // The hit that reaches the pass count stops the run: wake the reader.
    int not_last = a_.new_label();
    a_.emit(alu64_imm(BPF_ADD, R1, 1));
    if (tp_.pass_count <= uint64_t(INT32_MAX)) {
      a_.jump(jmp_imm(BPF_JNE, R1, int32_t(tp_.pass_count), 0), not_last);
    } else {
      a_.emit(ld_imm64(R2, tp_.pass_count));
      a_.jump(jmp_reg(BPF_JNE, R1, R2, 0), not_last);
    }
    a_.emit(st_imm(BPF_DW, R10, kWake, 1));
    a_.emit(ld_map_value(R1, maps_.control_fd, kStopFlagOffset));
    a_.emit(st_imm(BPF_DW, R1, 0, 1));
    a_.bind(not_last);
  }
  reserve_at_ = reserve_record(drop_);
  a_.emit(mov64_imm(R8, kFrame + kHeader));
  store_tp_number(BPF_H, kFrame); // header: u16 tracepoint
}

// r0 = the element of map MAP_FD at the key stored at kKey; MISSING_LABEL
// when there is none.
void Generator::lookup_key(int map_fd, int missing_label) {
  a_.emit(ld_map_fd(R1, map_fd));
  a_.emit(mov64_reg(R2, R10));
  a_.emit(alu64_imm(BPF_ADD, R2, kKey));
  a_.emit(call(BPF_FUNC_map_lookup_elem));
  a_.jump(jmp_imm(BPF_JEQ, R0, 0, 0), missing_label);
}

// r7 = a record reserved in this CPU's ring (the map pointer kept at kRing),
// or, when that is full and there are overflow rings, in this CPU's overflow
// ring (marked in kWake for finish_frame), stamped with the time and the
// probe's slot; FAIL_LABEL when no ring has room. Returns where the
// reservations' sizes go (patched once the actions are known).
std::vector<size_t> Generator::reserve_record(int fail_label) {
  std::vector<size_t> sizes_at;
  a_.emit(call(BPF_FUNC_get_smp_processor_id));
  a_.emit(stx(BPF_W, R10, kKey, R0));
  if (maps_.overflow_fd < 0) {
    reserve_in(maps_.ringbuf_fd, fail_label, sizes_at);
  } else {
    int full = a_.new_label(), reserved = a_.new_label();
    reserve_in(maps_.ringbuf_fd, full, sizes_at);
    a_.ja(reserved);
    a_.bind(full);
    reserve_in(maps_.overflow_fd, fail_label, sizes_at);
    a_.emit(ldx(BPF_DW, R1, R10, kWake));
    a_.emit(alu64_imm(BPF_OR, R1, 2));
    a_.emit(stx(BPF_DW, R10, kWake, R1));
    a_.bind(reserved);
  }
  a_.emit(mov64_reg(R7, R0));
  a_.emit(call(BPF_FUNC_ktime_get_ns));
  a_.emit(stx(BPF_DW, R7, 0, R0));
  load_slot(R1);
  a_.emit(stx(BPF_DW, R7, kRecordStamp, R1));
  return sizes_at;
}

// r0 = a reservation in the ring of map OUTER_FD at the key kept at kKey (the
// map pointer kept at kRing); FAIL_LABEL when it has no room.
void Generator::reserve_in(int outer_fd, int fail_label, std::vector<size_t>& sizes_at) {
  lookup_key(outer_fd, fail_label);
  a_.emit(stx(BPF_DW, R10, kRing, R0));
  a_.emit(mov64_reg(R1, R0));
  sizes_at.push_back(a_.size());
  a_.emit(mov64_imm(R2, 0));
  a_.emit(mov64_imm(R3, 0));
  a_.emit(call(BPF_FUNC_ringbuf_reserve));
  a_.jump(jmp_imm(BPF_JEQ, R0, 0, 0), fail_label);
}

Result<void> Generator::action(const TraceAction& act) {
  if (std::holds_alternative<CollectRegisters>(act)) {
    registers_block();
    return ok();
  }
  if (auto* m = std::get_if<CollectMemory>(&act))
    return memory_action(*m);
  const auto& x = std::get<CollectExpr>(act);
  int done = a_.new_label();
  if (auto r = expression(x.expr, false, done); !r)
    return r;
  a_.bind(done);
  return ok();
}

// Write the size, submit. Reached by every path that reserved a frame.
// Waking the reader for every frame would cost the tracee a context switch per
// hit on a busy machine: frames are submitted without a wake-up and the engine
// drains on its timer, unless this frame takes the ring past opts.wakeup_bytes
// or ends the run (pass count), which must reach the engine at once. Only the
// frame that crosses the mark wakes the reader (which then drains everything):
// waking on every frame above it costs each hit an irq_work until the reader
// has run, several µs on a busy VM. A frame in an overflow ring wakes the
// reader at once (it is behind), unless the stub defers draining: then first
// rings wake nobody and an overflow ring wakes at its own mark.
void Generator::finish_frame() {
  int submit = a_.new_label(), first_ring = a_.new_label(), query = a_.new_label();
  a_.emit(mov64_reg(R1, R8));
  a_.emit(alu64_imm(BPF_SUB, R1, kFrame + kHeader));
  a_.emit(stx(BPF_W, R7, kFrame + kSizeField, R1));
  a_.emit(mov64_imm(R2, BPF_RB_FORCE_WAKEUP));
  a_.emit(ldx(BPF_DW, R0, R10, kWake));
  a_.jump(jmp_imm(BPF_JSET, R0, 1, 0), submit);
  a_.emit(ld_map_value(R1, maps_.control_fd, kDeferWakeOffset));
  a_.emit(ldx(BPF_DW, R1, R1, 0));
  a_.jump(jmp_imm(BPF_JEQ, R0, 0, 0), first_ring);
  a_.jump(jmp_imm(BPF_JEQ, R1, 0, 0), submit); // overflow, not deferring: wake now
  a_.emit(mov64_imm(R8, int32_t(opts_.overflow_wakeup_bytes)));
  a_.ja(query);
  a_.bind(first_ring);
  a_.emit(mov64_imm(R2, BPF_RB_NO_WAKEUP));
  a_.jump(jmp_imm(BPF_JNE, R1, 0, 0), submit); // deferring: the first rings wake nobody
  a_.emit(mov64_imm(R8, int32_t(opts_.wakeup_bytes)));
  a_.bind(query); // r8 = the ring's mark (r8 held the frame's size, written above)
  a_.emit(ldx(BPF_DW, R1, R10, kRing));
  a_.emit(mov64_imm(R2, BPF_RB_AVAIL_DATA));
  a_.emit(call(BPF_FUNC_ringbuf_query)); // unconsumed bytes, this record included
  a_.emit(alu64_reg(BPF_SUB, R0, R8));
  wake_window_at_ = a_.size(); // r3 = this record's largest size, patched in run()
  a_.emit(mov64_imm(R3, 0));
  a_.emit(mov64_imm(R2, BPF_RB_NO_WAKEUP));
  a_.jump(jmp_reg(BPF_JGE, R0, R3, 0), submit); // below the mark (wrapped) or past it already
  a_.emit(mov64_imm(R2, BPF_RB_FORCE_WAKEUP));
  a_.bind(submit);
  a_.emit(mov64_reg(R1, R7));
  a_.emit(call(BPF_FUNC_ringbuf_submit));
  a_.bind(exit_);
  // Every path ends here, hit or not (disabled, condition false, errors): the
  // instruction runs once per trap whatever the program collected.
  if (opts_.emulation) {
    int declined = a_.new_label();
    emit_emulation(a_, *opts_.emulation, R6, kKey, declined);
    stats_add(offsetof(StatsSlot, emulated));
    a_.bind(declined);
  }
  a_.emit(mov64_imm(R0, 0));
  a_.emit(exit_insn());
}

// stats[slot].FIELD += 1 (per-CPU map, rare paths only).
void Generator::stats_add(uint32_t field_offset) {
  int skip = a_.new_label();
  load_slot(R1);
  a_.emit(stx(BPF_DW, R10, kKey, R1));
  lookup_key(maps_.stats_fd, skip);
  a_.emit(mov64_imm(R1, 1));
  a_.emit(atomic64(BPF_ADD, R0, int16_t(field_offset), R1));
  a_.bind(skip);
}

void Generator::error_paths() {
  // Ring buffer full: count a drop, never write a torn frame.
  a_.bind(drop_);
  stats_add(offsetof(StatsSlot, drops));
  a_.emit(ld_map_value(R1, maps_.control_fd, kDropCountOffset));
  a_.emit(mov64_imm(R2, 1));
  a_.emit(atomic64(BPF_ADD, R1, 0, R2));
  a_.emit(mov64_imm(R2, 1)); // r9: this probe's control slot, from the prologue

  a_.emit(atomic64(BPF_ADD, R9, offsetof(ControlSlot, drops), R2));
  a_.ja(exit_);

  bool action_errors = a_.referenced(action_error_);
  if (!action_errors && !a_.referenced(cond_error_))
    return;
  // An error after the frame was reserved: the frame is dropped (as the ptrace
  // collector does) and the engine stops the run with the error.
  if (action_errors) {
    a_.bind(action_error_);
    a_.emit(mov64_reg(R1, R7));
    a_.emit(mov64_imm(R2, 0));
    a_.emit(call(BPF_FUNC_ringbuf_discard));
    a_.ja(error_common_);
  }

  a_.bind(cond_error_);
  a_.bind(error_common_);
  // Remember the last error for the collector, count it, and tell the engine
  // through the ring buffer (which also wakes the reader).
  load_control_slot();
  a_.emit(ldx(BPF_DW, R1, R10, kErrStatus));
  a_.emit(stx(BPF_DW, R9, offsetof(ControlSlot, last_error), R1));
  a_.emit(ldx(BPF_DW, R1, R10, kErrPc));
  a_.emit(stx(BPF_DW, R9, offsetof(ControlSlot, last_error_pc), R1));
  stats_add(offsetof(StatsSlot, errors));
  for (size_t at : reserve_record(exit_))
    a_.patch(at, mov64_imm(R2, int32_t(kFrame + sizeof(ErrorRecord))));
  auto at = [](size_t field) { return int16_t(kFrame + field); };
  a_.emit(st_imm(BPF_H, R7, at(offsetof(ErrorRecord, marker)), kErrorMarker));
  a_.emit(st_imm(BPF_W, R7, at(offsetof(ErrorRecord, size)), sizeof(ErrorRecord) - kHeader));
  store_tp_number(BPF_W, at(offsetof(ErrorRecord, tp_number)));
  a_.emit(ldx(BPF_DW, R1, R10, kErrStatus));
  a_.emit(stx(BPF_W, R7, at(offsetof(ErrorRecord, status)), R1));
  a_.emit(ldx(BPF_DW, R1, R10, kErrPc));
  a_.emit(stx(BPF_W, R7, at(offsetof(ErrorRecord, pc)), R1));
  a_.emit(ldx(BPF_DW, R1, R10, kErrCond));
  a_.emit(stx(BPF_W, R7, at(offsetof(ErrorRecord, in_condition)), R1));
  a_.emit(mov64_reg(R1, R7));
  a_.emit(mov64_imm(R2, BPF_RB_FORCE_WAKEUP));
  a_.emit(call(BPF_FUNC_ringbuf_submit));
  a_.ja(exit_);
}

void Generator::raise(int status, uint32_t pc, bool in_condition) {
  a_.emit(st_imm(BPF_DW, R10, kErrStatus, status));
  a_.emit(st_imm(BPF_DW, R10, kErrPc, int32_t(pc)));
  a_.emit(st_imm(BPF_DW, R10, kErrCond, in_condition ? 1 : 0));
  a_.ja(in_condition ? cond_error_ : action_error_);
}

} // namespace codegen

using codegen::kMaxAxSlots;
using codegen::refuse;

namespace {

// The part of check_tracepoint() that looks at one expression.
Result<void> check_expression(const AgentExpr& e) {
  if (e.depth.size() != e.code.size())
    return refuse("agent expression was not verified");
  if (e.info.uses_printf)
    return refuse("printf in an agent expression needs the ptrace collector");
  if (e.info.has_backward_jump) // ax_verify sets it for reachable jumps only
    return refuse("loops (backward jumps) are not supported");
  if (e.info.max_stack > kMaxAxSlots)
    return refuse("agent expression needs more than " + std::to_string(kMaxAxSlots) +
                  " stack slots");
  return ok();
}

} // namespace

int pt_regs_offset(unsigned regno) {
  // struct pt_regs (arch/x86/include/asm/ptrace.h), x86-64.
  switch (regno) {
  case GT_R15:
    return 0;
  case GT_R14:
    return 8;
  case GT_R13:
    return 16;
  case GT_R12:
    return 24;
  case GT_RBP:
    return 32;
  case GT_RBX:
    return 40;
  case GT_R11:
    return 48;
  case GT_R10:
    return 56;
  case GT_R9:
    return 64;
  case GT_R8:
    return 72;
  case GT_RAX:
    return 80;
  case GT_RCX:
    return 88;
  case GT_RDX:
    return 96;
  case GT_RSI:
    return 104;
  case GT_RDI:
    return 112;
  case GT_ORIG_RAX:
    return 120;
  case GT_RIP:
    return 128;
  case GT_CS:
    return 136;
  case GT_EFLAGS:
    return 144;
  case GT_RSP:
    return 152;
  case GT_SS:
    return 160;
  default:
    return -1;
  }
}

bool register_available(unsigned regno, const CodegenOptions& opts) {
  if (regno == GT_FS_BASE)
    return opts.task_fsbase_offset.has_value();
  return pt_regs_offset(regno) >= 0;
}

// A register mask naming registers a uprobe's pt_regs lacks (x87/SSE/AVX,
// data segment selectors), other than gdb's all-registers mask of `collect
// $regs` (whose frames show those <unavailable>): the user asked for exactly
// those registers, and only the ptrace collector can read them.
static Result<void> check_register_mask(const CollectRegisters& regs) {
  bool all = true;
  for (unsigned r = 0; r < GT_NUM_REGS_NOAVX && all; r++)
    all = regs.names(r);
  if (all)
    return ok();
  for (unsigned r = 0; r < GT_NUM_REGS_AVX; r++)
    if (regs.names(r) && r != GT_FS_BASE && pt_regs_offset(r) < 0)
      return refuse("collecting x87/SSE/AVX or segment registers needs the ptrace collector");
  return ok();
}

Result<void> check_tracepoint(const Tracepoint& tp) {
  if (tp.step_count > 0)
    return refuse("while-stepping needs the ptrace collector");
  for (const auto& a : tp.actions)
    if (auto* regs = std::get_if<CollectRegisters>(&a))
      if (auto r = check_register_mask(*regs); !r)
        return r;
  if (tp.has_condition)
    if (auto r = check_expression(tp.condition); !r)
      return r;
  for (const auto& a : tp.actions)
    if (auto* x = std::get_if<CollectExpr>(&a))
      if (auto r = check_expression(x->expr); !r)
        return r;
  return ok();
}

Result<Program> generate_program(const Tracepoint& tp, const CodegenMaps& maps,
                                 const CodegenOptions& opts) {
  return codegen::Generator(tp, maps, opts).run();
}

} // namespace gdbtrace::bpf
