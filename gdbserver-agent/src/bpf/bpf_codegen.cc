// Tracepoint -> BPF program. See bpf_codegen.h for the shape of the program.
#include "bpf/bpf_codegen.h"

#include <cstring>
#include <map>

#include "abi/amd64_regs.h"
#include "abi/ax_opcodes.h"
#include "abi/tframe.h"
#include "bpf/bpf_asm.h"
#include "bpf/bpf_layout.h"
#include "bpf/bpf_rings.h"
#include "trace/compact_frame.h"

namespace gdbtrace::bpf {
namespace {

// BPF stack (offsets from R10). Everything is 8-byte slots.
constexpr int16_t kErrStatus = -8;
constexpr int16_t kErrPc = -16;
constexpr int16_t kKey = -24;     // u32 map key for lookups; also scratch
constexpr int16_t kErrCond = -32; // 1 when the error happened in the condition
constexpr int16_t kAddr = -40;    // address of the memory block being collected
constexpr int16_t kWake = -48;    // 1: this frame must wake the reader (pass count reached)
constexpr int16_t kRing = -56;    // this CPU's ring buffer (map pointer from the ring array)
constexpr int16_t kStackBase = -64;
constexpr uint32_t kMaxAxSlots = (512 + kStackBase) / 8 + 1; // 56
int16_t slot(uint32_t i) {
  return int16_t(kStackBase - 8 * int(i));
}

// Frame bytes, named after abi/tframe.h (BPF immediates are 32-bit).
constexpr int32_t kHeader = GT_TFRAME_HEADER_SIZE;
constexpr int16_t kSizeField = GT_TFRAME_SIZE_OFFSET;
constexpr int32_t kMemHeader = GT_TFRAME_MEM_HEADER;
constexpr int16_t kMemAddr = GT_TFRAME_MEM_ADDR_OFFSET;
constexpr int16_t kMemLen = GT_TFRAME_MEM_LEN_OFFSET;
constexpr int32_t kTsvBlock = GT_TFRAME_TSV_SIZE;
// Every record starts with its stamp (bpf_rings.h) and its probe's slot
// (bpf_layout.h); the frame follows them.
constexpr int16_t kFrame = kRecordStamp + kRecordSlot;

const char* op_name(uint8_t op) {
  const char* n = ax_op_name(op);
  return n ? n : "?";
}

// Bytes of the instruction at PC (opcode and operands; printf is refused before).
uint32_t insn_size(const std::vector<uint8_t>& code, uint32_t pc) {
  return 1u + ax_opinfo(code[pc])->operand_bytes;
}

uint64_t operand(const std::vector<uint8_t>& code, uint32_t pc) {
  return ax_operand(&code[pc + 1], ax_opinfo(code[pc])->operand_bytes);
}

Error refuse(const std::string& what) {
  return make_error(EOPNOTSUPP, "the eBPF collector cannot run this tracepoint: " + what);
}

// The part of check_tracepoint() that looks at one expression.
Result<void> check_expression(const AgentExpr& e) {
  if (e.depth.size() != e.code.size())
    return refuse("agent expression was not verified");
  if (e.info.uses_printf)
    return refuse("printf in an agent expression needs the ptrace collector");
  for (uint32_t pc = 0; pc < e.code.size(); pc += insn_size(e.code, pc))
    if (e.depth[pc] >= 0 && (ax_opinfo(e.code[pc])->flags & AX_F_JUMP) && operand(e.code, pc) <= pc)
      return refuse("loops (backward jumps) are not supported");
  if (e.info.max_stack > kMaxAxSlots)
    return refuse("agent expression needs more than " + std::to_string(kMaxAxSlots) +
                  " stack slots");
  return ok();
}

class Generator {
public:
  Generator(const Tracepoint& tp, const CodegenMaps& maps, const CodegenOptions& opts)
      : tp_(tp), maps_(maps), opts_(opts) {}

  Result<Program> run();

private:
  // --- pieces of the program ---
  // r0 = 0 when the user memory ARGS() names (r1 dst, r2 size, r3 src) was
  // read. bpf_probe_read_user first: it never faults, and it skips what
  // bpf_copy_from_user pays on every call — hardened usercopy's check of the
  // destination, which for ring-buffer (vmalloc) memory looks the area up
  // under a global spinlock (find_vmap_area: most of the 64 B-via-pointer
  // row's cost outside the program). Sleepable programs then retry a failed
  // read with bpf_copy_from_user, which can fault pages in: memory the tracee
  // has not touched yet is still readable.
  void read_user(const std::function<void()>& args);
  void prologue();
  void skip_resumed_thread();
  Result<void> condition();
  void count_hit_and_reserve();
  void reserve_record(int fail_label);
  Result<void> action(const TraceAction& a);
  void finish_frame();
  void error_paths();

  // --- collection blocks ---
  void registers_block();
  Result<void> memory_action(const CollectMemory& m);
  // Address in kAddr. ERROR_PC: unreadable memory raises AX_ERR_MEM (trace ops);
  // nullopt: the block is left out ('M' actions, like gdbserver).
  void memory_block_const(uint32_t len, std::optional<uint32_t> error_pc);
  void memory_block_dynamic(uint8_t size_reg, bool nz, uint32_t max, uint32_t error_pc);
  void stack_piece(uint32_t len);
  void tsv_block(uint32_t number, uint32_t index);

  // --- agent expressions ---
  Result<void> expression(const AgentExpr& e, bool is_condition, int end_label);
  void mark_jump_targets(const AgentExpr& e);
  Result<void> op(const AgentExpr& e, uint32_t pc, uint32_t d, bool is_condition, int end_label,
                  uint32_t& next_pc);
  void raise(int status, uint32_t pc, bool in_condition);
  Result<void> load_register(uint8_t dst, unsigned regno);
  Result<uint32_t> tsv(uint32_t number);
  void load_tsv(uint8_t dst, uint32_t number, uint32_t index);
  void store_const(int16_t off, uint64_t v);
  void load_const(uint8_t dst, uint64_t v);
  void stats_add(uint32_t field_offset);

  const Tracepoint& tp_;
  const CodegenMaps& maps_;
  const CodegenOptions& opts_;
  Assembler a_;
  Program out_;
  size_t reserve_at_ = 0;
  size_t wake_window_at_ = 0;
  int exit_ = -1, drop_ = -1, cond_error_ = -1, action_error_ = -1, error_common_ = -1;
  std::map<uint32_t, int> pc_labels_;
  std::vector<bool> jump_target_; // of the expression being translated
};

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
  a_.patch(reserve_at_, mov64_imm(R2, int32_t(kFrame + out_.frame_max)));
  // A record: 8-byte ring header + stamp + frame, rounded up to 8.
  a_.patch(wake_window_at_,
           mov64_imm(R3, int32_t((BPF_RINGBUF_HDR_SZ + kFrame + out_.frame_max + 7) & ~7u)));
  if (!a_.finish(out_.insns))
    return refuse("generated program too large (jump out of range)");
  return std::move(out_);
}

// r6 = pt_regs, r9 = &control[slot]; leave when disabled.
void Generator::prologue() {
  out_.frame_max = kHeader;
  a_.emit(mov64_reg(R6, R1));
  a_.emit(ld_map_value(R9, maps_.control_fd, opts_.slot * sizeof(ControlSlot)));
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
  a_.emit(alu64_imm(BPF_OR, R0, int32_t(opts_.slot)));
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
  reserve_record(drop_);
  a_.emit(mov64_imm(R8, kFrame + kHeader));
  a_.emit(st_imm(BPF_H, R7, kFrame, int32_t(tp_.number & 0xffff))); // header: u16 tracepoint
}

// r7 = a record reserved in this CPU's ring (the map pointer kept at kRing),
// stamped with the time and the probe's slot; FAIL_LABEL when the ring is full. The reservation
// size is patched in run() once the actions are known.
void Generator::reserve_record(int fail_label) {
  a_.emit(call(BPF_FUNC_get_smp_processor_id));
  a_.emit(stx(BPF_W, R10, kKey, R0));
  a_.emit(ld_map_fd(R1, maps_.ringbuf_fd));
  a_.emit(mov64_reg(R2, R10));
  a_.emit(alu64_imm(BPF_ADD, R2, kKey));
  a_.emit(call(BPF_FUNC_map_lookup_elem));
  a_.jump(jmp_imm(BPF_JEQ, R0, 0, 0), fail_label);
  a_.emit(stx(BPF_DW, R10, kRing, R0));
  a_.emit(mov64_reg(R1, R0));
  reserve_at_ = a_.size();
  a_.emit(mov64_imm(R2, 0));
  a_.emit(mov64_imm(R3, 0));
  a_.emit(call(BPF_FUNC_ringbuf_reserve));
  a_.jump(jmp_imm(BPF_JEQ, R0, 0, 0), fail_label);
  a_.emit(mov64_reg(R7, R0));
  a_.emit(call(BPF_FUNC_ktime_get_ns));
  a_.emit(stx(BPF_DW, R7, 0, R0));
  a_.emit(st_imm(BPF_DW, R7, kRecordStamp, int32_t(opts_.slot)));
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
// has run, several µs on a busy VM.
void Generator::finish_frame() {
  int submit = a_.new_label();
  a_.emit(mov64_reg(R1, R8));
  a_.emit(alu64_imm(BPF_SUB, R1, kFrame + kHeader));
  a_.emit(stx(BPF_W, R7, kFrame + kSizeField, R1));
  a_.emit(mov64_imm(R2, BPF_RB_FORCE_WAKEUP));
  a_.emit(ldx(BPF_DW, R0, R10, kWake));
  a_.jump(jmp_imm(BPF_JNE, R0, 0, 0), submit);
  a_.emit(ldx(BPF_DW, R1, R10, kRing));
  a_.emit(mov64_imm(R2, BPF_RB_AVAIL_DATA));
  a_.emit(call(BPF_FUNC_ringbuf_query)); // unconsumed bytes, this record included
  a_.emit(alu64_imm(BPF_SUB, R0, int32_t(opts_.wakeup_bytes)));
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
  a_.emit(st_imm(BPF_DW, R10, kKey, int32_t(opts_.slot)));
  a_.emit(ld_map_fd(R1, maps_.stats_fd));
  a_.emit(mov64_reg(R2, R10));
  a_.emit(alu64_imm(BPF_ADD, R2, kKey));
  a_.emit(call(BPF_FUNC_map_lookup_elem));
  a_.jump(jmp_imm(BPF_JEQ, R0, 0, 0), skip);
  a_.emit(mov64_imm(R1, 1));
  a_.emit(atomic64(BPF_ADD, R0, int16_t(field_offset), R1));
  a_.bind(skip);
}

void Generator::error_paths() {
  // Ring buffer full: count a drop, never write a torn frame.
  a_.bind(drop_);
  stats_add(offsetof(StatsSlot, drops));
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
  a_.emit(ld_map_value(R9, maps_.control_fd, opts_.slot * sizeof(ControlSlot)));
  a_.emit(ldx(BPF_DW, R1, R10, kErrStatus));
  a_.emit(stx(BPF_DW, R9, offsetof(ControlSlot, last_error), R1));
  a_.emit(ldx(BPF_DW, R1, R10, kErrPc));
  a_.emit(stx(BPF_DW, R9, offsetof(ControlSlot, last_error_pc), R1));
  stats_add(offsetof(StatsSlot, errors));
  size_t frame_reserve = reserve_at_;
  reserve_record(exit_);
  a_.patch(reserve_at_, mov64_imm(R2, int32_t(kFrame + sizeof(ErrorRecord))));
  reserve_at_ = frame_reserve;
  auto at = [](size_t field) { return int16_t(kFrame + field); };
  a_.emit(st_imm(BPF_H, R7, at(offsetof(ErrorRecord, marker)), kErrorMarker));
  a_.emit(st_imm(BPF_W, R7, at(offsetof(ErrorRecord, size)), sizeof(ErrorRecord) - kHeader));
  a_.emit(st_imm(BPF_W, R7, at(offsetof(ErrorRecord, tp_number)), int32_t(tp_.number)));
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

// --- registers ---

Result<void> Generator::load_register(uint8_t dst, unsigned regno) {
  if (regno == GT_FS_BASE && opts_.task_fsbase_offset) {
    // current->thread.fsbase: kept up to date by arch_prctl(ARCH_SET_FS).
    a_.emit(call(BPF_FUNC_get_current_task));
    a_.emit(mov64_reg(R3, R0));
    a_.emit(alu64_imm(BPF_ADD, R3, int32_t(*opts_.task_fsbase_offset)));
    a_.emit(st_imm(BPF_DW, R10, kKey, 0));
    a_.emit(mov64_reg(R1, R10));
    a_.emit(alu64_imm(BPF_ADD, R1, kKey));
    a_.emit(mov64_imm(R2, 8));
    a_.emit(call(BPF_FUNC_probe_read_kernel));
    a_.emit(ldx(BPF_DW, dst, R10, kKey));
    return ok();
  }
  int off = pt_regs_offset(regno);
  if (off < 0)
    return refuse("register " + std::to_string(regno) + " is not visible to a uprobe");
  uint8_t size = BPF_DW;
  if (regno == GT_EFLAGS)
    size = BPF_W;
  if (regno == GT_CS || regno == GT_SS)
    size = BPF_H;
  a_.emit(ldx(size, dst, R6, int16_t(off)));
  return ok();
}

// The compact register block (trace/compact_frame.h): the tag, then a u64 per register
// the uprobe can read; the collector spreads them over the 'R' block.
void Generator::registers_block() {
  uint32_t n = opts_.regblock_size;
  out_.registers.assign(GT_NUM_REGS_AVX, false);
  out_.compact_registers.clear(); // `collect $regs` twice writes the same block twice
  bool fsbase = register_available(GT_FS_BASE, opts_);
  if (fsbase) {
    (void)load_register(R4, GT_FS_BASE); // the helper calls clobber r1-r5: read it first
    a_.emit(stx(BPF_DW, R10, kAddr, R4));
  }
  a_.emit(mov64_reg(R1, R7));
  a_.emit(alu64_reg(BPF_ADD, R1, R8));
  a_.emit(st_imm(BPF_B, R1, 0, GT_TFRAME_COMPACT_REGS));
  int32_t at = 1;
  for (unsigned r = 0; r < GT_NUM_REGS_AVX; r++) {
    if (gt_reg_offset(r) + gt_reg_size(r) > n)
      continue;
    if (r == GT_FS_BASE && fsbase) {
      a_.emit(ldx(BPF_DW, R2, R10, kAddr));
    } else if (pt_regs_offset(r) >= 0) {
      (void)load_register(R2, r); // narrower registers are zero-extended
    } else {
      continue;
    }
    a_.emit(stx(BPF_DW, R1, int16_t(at), R2));
    at += 8;
    out_.registers[r] = true;
    out_.compact_registers.push_back(r);
  }
  a_.emit(alu64_imm(BPF_ADD, R8, at));
  out_.frame_max += uint32_t(at);
}

// --- memory blocks ---

// 'M' + addr + u16 len + bytes at r7+r8, address in kAddr. Unreadable memory
// leaves the block out (gdb then shows <unavailable>), without a branch so the
// verifier sees one path: r8 += ok * (kMemHeader + len).
void Generator::memory_block_const(uint32_t len, std::optional<uint32_t> error_pc) {
  for (uint32_t done = 0; done < len;) {
    uint32_t n = std::min<uint32_t>(len - done, GT_TFRAME_MEM_MAX);
    a_.emit(mov64_reg(R1, R7));
    a_.emit(alu64_reg(BPF_ADD, R1, R8));
    a_.emit(st_imm(BPF_B, R1, 0, GT_TFRAME_MEM));
    a_.emit(ldx(BPF_DW, R3, R10, kAddr));
    if (done)
      a_.emit(alu64_imm(BPF_ADD, R3, int32_t(done)));
    a_.emit(stx(BPF_DW, R1, kMemAddr, R3));
    a_.emit(st_imm(BPF_H, R1, kMemLen, int32_t(n)));
    read_user([&] {
      a_.emit(mov64_reg(R1, R7));
      a_.emit(alu64_reg(BPF_ADD, R1, R8));
      a_.emit(alu64_imm(BPF_ADD, R1, kMemHeader));
      a_.emit(mov64_imm(R2, int32_t(n)));
      a_.emit(ldx(BPF_DW, R3, R10, kAddr));
      if (done)
        a_.emit(alu64_imm(BPF_ADD, R3, int32_t(done)));
    });
    if (error_pc) {
      int readable = a_.new_label();
      a_.jump(jmp_imm(BPF_JEQ, R0, 0, 0), readable);
      raise(AX_ERR_MEM, *error_pc, false);
      a_.bind(readable);
      a_.emit(alu64_imm(BPF_ADD, R8, int32_t(kMemHeader + n)));
    } else {
      a_.emit(alu64_imm(BPF_RSH, R0, 63)); // 1 on error (negative), 0 on success
      a_.emit(alu64_imm(BPF_XOR, R0, 1));
      a_.emit(alu64_imm(BPF_MUL, R0, int32_t(kMemHeader + n)));
      a_.emit(alu64_reg(BPF_ADD, R8, R0));
    }
    out_.frame_max += kMemHeader + n;
    done += n;
  }
}

// Same with the length in SIZE_REG (already bounded by MAX). NZ: tracenz, stop
// after the first NUL (collected too): read MAX+1 bytes with
// probe_read_user_str, which returns the bytes copied including the NUL it
// adds; a return of size+1 means no NUL within size bytes, so size are kept.
void Generator::memory_block_dynamic(uint8_t size_reg, bool nz, uint32_t max, uint32_t error_pc) {
  a_.emit(mov64_reg(R9, size_reg)); // callee-saved: keeps its verifier bounds across the call
  a_.emit(mov64_reg(R1, R7));
  a_.emit(alu64_reg(BPF_ADD, R1, R8));
  a_.emit(st_imm(BPF_B, R1, 0, GT_TFRAME_MEM));
  a_.emit(ldx(BPF_DW, R3, R10, kAddr));
  a_.emit(stx(BPF_DW, R1, kMemAddr, R3));
  a_.emit(alu64_imm(BPF_ADD, R1, kMemHeader));
  a_.emit(mov64_reg(R2, R9));
  if (!nz) {
    a_.emit(stx(BPF_H, R1, kMemLen - kMemHeader, R9));
    read_user([&] {
      a_.emit(mov64_reg(R1, R7));
      a_.emit(alu64_reg(BPF_ADD, R1, R8));
      a_.emit(alu64_imm(BPF_ADD, R1, kMemHeader));
      a_.emit(mov64_reg(R2, R9));
      a_.emit(ldx(BPF_DW, R3, R10, kAddr));
    });
    int readable = a_.new_label();
    a_.jump(jmp_imm(BPF_JEQ, R0, 0, 0), readable);
    raise(AX_ERR_MEM, error_pc, false);
    a_.bind(readable);
    a_.emit(alu64_imm(BPF_ADD, R9, kMemHeader));
    a_.emit(alu64_reg(BPF_ADD, R8, R9));
    out_.frame_max += kMemHeader + max;
    return;
  }
  int positive = a_.new_label(), have = a_.new_label();
  if (opts_.sleepable) {
    // probe_read_user_str never faults pages in, so a string on a page the
    // tracee has not touched yet (e.g. .rodata) would read as unreadable.
    // Touch its first byte with copy_from_user (which may fault) first; its
    // result does not matter, the string read below decides.
    a_.emit(mov64_imm(R2, 1));
    a_.emit(call(BPF_FUNC_copy_from_user));
    a_.emit(mov64_reg(R1, R7));
    a_.emit(alu64_reg(BPF_ADD, R1, R8));
    a_.emit(alu64_imm(BPF_ADD, R1, kMemHeader));
    a_.emit(ldx(BPF_DW, R3, R10, kAddr));
    a_.emit(mov64_reg(R2, R9));
  }
  a_.emit(alu64_imm(BPF_ADD, R2, 1));
  a_.emit(call(BPF_FUNC_probe_read_user_str));
  // r0: bytes copied incl. the NUL (1..size+1), or negative: unreadable.
  a_.jump(jmp_imm(BPF_JSGT, R0, 0, 0), positive);
  raise(AX_ERR_MEM, error_pc, false);
  a_.bind(positive);
  a_.jump(jmp_reg(BPF_JLE, R0, R9, 0), have);
  a_.emit(mov64_reg(R0, R9));
  a_.bind(have);
  a_.emit(mov64_reg(R1, R7));
  a_.emit(alu64_reg(BPF_ADD, R1, R8));
  a_.emit(stx(BPF_H, R1, kMemLen, R0));
  a_.emit(alu64_imm(BPF_ADD, R0, kMemHeader));
  a_.emit(alu64_reg(BPF_ADD, R8, R0));
  out_.frame_max += kMemHeader + max + 1;
}

// One piece of a stack snapshot (trace/stack_actions.h), address in kAddr:
// read whole when it can be, else only the part before the next page
// boundary. Near the top of the stack the piece runs past the end of the
// mapping, and the bytes before that end hold the outermost frames an
// unwinder needs: a program started with a small environment has main's
// frame within one piece of the end, so leaving the whole piece out lost
// every caller. A piece is smaller than a page (at most 2 KiB), so it crosses
// at most one boundary, and the end of a mapping is one.
void Generator::stack_piece(uint32_t len) {
  int whole = a_.new_label(), done = a_.new_label();
  auto args = [&](uint8_t size_reg) {
    a_.emit(mov64_reg(R1, R7));
    a_.emit(alu64_reg(BPF_ADD, R1, R8));
    a_.emit(alu64_imm(BPF_ADD, R1, kMemHeader));
    if (size_reg == R0)
      a_.emit(mov64_imm(R2, int32_t(len)));
    else
      a_.emit(mov64_reg(R2, size_reg));
    a_.emit(ldx(BPF_DW, R3, R10, kAddr));
  };
  a_.emit(mov64_reg(R1, R7));
  a_.emit(alu64_reg(BPF_ADD, R1, R8));
  a_.emit(st_imm(BPF_B, R1, 0, GT_TFRAME_MEM));
  a_.emit(ldx(BPF_DW, R3, R10, kAddr));
  a_.emit(stx(BPF_DW, R1, kMemAddr, R3));
  a_.emit(st_imm(BPF_H, R1, kMemLen, int32_t(len)));
  read_user([&] { args(R0); });
  a_.jump(jmp_imm(BPF_JEQ, R0, 0, 0), whole);
  // r9 = 4096 - (addr & 4095): 1..4096 bytes up to the next page boundary.
  a_.emit(ldx(BPF_DW, R9, R10, kAddr));
  a_.emit(alu64_imm(BPF_AND, R9, 4095));
  a_.emit(mov64_imm(R2, 4096));
  a_.emit(alu64_reg(BPF_SUB, R2, R9));
  a_.emit(mov64_reg(R9, R2));
  a_.jump(jmp_imm(BPF_JGE, R9, int32_t(len), 0), done); // no boundary inside: the piece is lost
  a_.emit(mov64_reg(R1, R7));
  a_.emit(alu64_reg(BPF_ADD, R1, R8));
  a_.emit(stx(BPF_H, R1, kMemLen, R9));
  read_user([&] { args(R9); });
  a_.jump(jmp_imm(BPF_JNE, R0, 0, 0), done);
  a_.emit(alu64_imm(BPF_ADD, R9, kMemHeader));
  a_.emit(alu64_reg(BPF_ADD, R8, R9));
  a_.ja(done);
  a_.bind(whole);
  a_.emit(alu64_imm(BPF_ADD, R8, int32_t(kMemHeader + len)));
  a_.bind(done);
  out_.frame_max += kMemHeader + len;
}

Result<void> Generator::memory_action(const CollectMemory& m) {
  if (m.basereg >= 0) {
    if (!register_available(unsigned(m.basereg), opts_))
      return refuse("register " + std::to_string(m.basereg) + " is not visible to a uprobe");
    if (auto r = load_register(R0, unsigned(m.basereg)); !r)
      return r;
    a_.emit(ld_imm64(R1, uint64_t(m.offset)));
    a_.emit(alu64_reg(BPF_ADD, R0, R1));
    a_.emit(stx(BPF_DW, R10, kAddr, R0));
  } else {
    store_const(kAddr, uint64_t(m.offset));
  }
  if (m.stack && m.length <= GT_TFRAME_MEM_MAX && m.length < 4096)
    stack_piece(m.length);
  else
    memory_block_const(m.length, std::nullopt);
  return ok();
}

void Generator::load_tsv(uint8_t dst, uint32_t number, uint32_t index) {
  if (opts_.timestamp_tsv && number == *opts_.timestamp_tsv) {
    a_.emit(call(BPF_FUNC_ktime_get_ns));
    a_.emit(alu64_imm(BPF_DIV, R0, 1000));
    if (opts_.timestamp_offset_us) {
      a_.emit(ld_imm64(R1, uint64_t(opts_.timestamp_offset_us)));
      a_.emit(alu64_reg(BPF_ADD, R0, R1));
    }
    if (dst != R0)
      a_.emit(mov64_reg(dst, R0));
    return;
  }
  a_.emit(ld_map_value(R1, maps_.tsv_fd, index * 8));
  a_.emit(ldx(BPF_DW, dst, R1, 0));
}

void Generator::tsv_block(uint32_t number, uint32_t index) {
  load_tsv(R2, number, index);
  a_.emit(mov64_reg(R1, R7));
  a_.emit(alu64_reg(BPF_ADD, R1, R8));
  a_.emit(st_imm(BPF_B, R1, 0, GT_TFRAME_TSV));
  a_.emit(st_imm(BPF_W, R1, GT_TFRAME_TSV_NUM_OFFSET, int32_t(number)));
  a_.emit(stx(BPF_DW, R1, GT_TFRAME_TSV_VALUE_OFFSET, R2));
  a_.emit(alu64_imm(BPF_ADD, R8, kTsvBlock));
  out_.frame_max += kTsvBlock;
}

Result<uint32_t> Generator::tsv(uint32_t number) {
  if (opts_.timestamp_tsv && number == *opts_.timestamp_tsv)
    return 0u;
  auto idx = opts_.tsv_index ? opts_.tsv_index(number) : std::nullopt;
  if (!idx)
    return refuse("no room for trace state variable " + std::to_string(number));
  return *idx;
}

// --- agent expressions ---

// Labels for the jump targets of reachable jumps. ax_verify proved the rest
// (targets on instruction starts, one stack depth per instruction, recorded in
// AgentExpr::depth); check_tracepoint() refused what the translator cannot do.
void Generator::mark_jump_targets(const AgentExpr& e) {
  const auto& code = e.code;
  jump_target_.assign(code.size() + 1, false);
  pc_labels_.clear();
  for (uint32_t pc = 0; pc < code.size(); pc += insn_size(code, pc))
    if (e.depth[pc] >= 0 && (ax_opinfo(code[pc])->flags & AX_F_JUMP)) {
      uint32_t target = uint32_t(operand(code, pc));
      jump_target_[target] = true;
      if (!pc_labels_.count(target))
        pc_labels_[target] = a_.new_label();
    }
}

Result<void> Generator::expression(const AgentExpr& e, bool is_condition, int end_label) {
  mark_jump_targets(e);
  for (uint32_t pc = 0; pc < e.code.size();) {
    uint32_t next = pc + insn_size(e.code, pc);
    if (e.depth[pc] < 0) { // unreachable: nothing to emit
      pc = next;
      continue;
    }
    if (auto it = pc_labels_.find(pc); it != pc_labels_.end())
      a_.bind(it->second);
    if (auto r = op(e, pc, uint32_t(e.depth[pc]), is_condition, end_label, next); !r)
      return r;
    pc = next;
  }
  return ok();
}

// One AX instruction at PC with D values on the stack (top = slot(D-1)).
Result<void> Generator::op(const AgentExpr& e, uint32_t pc, uint32_t d, bool is_condition,
                           int end_label, uint32_t& next_pc) {
  const auto& code = e.code;
  uint8_t op = code[pc];
  uint64_t arg = operand(code, pc);
  auto binary = [&](uint8_t alu, int16_t off = 0) {
    a_.emit(ldx(BPF_DW, R0, R10, slot(d - 2)));
    a_.emit(ldx(BPF_DW, R1, R10, slot(d - 1)));
    a_.emit(alu64_reg(alu, R0, R1, off));
    a_.emit(stx(BPF_DW, R10, slot(d - 2), R0));
  };
  auto compare = [&](uint8_t jop) {
    int yes = a_.new_label();
    a_.emit(ldx(BPF_DW, R0, R10, slot(d - 2)));
    a_.emit(ldx(BPF_DW, R1, R10, slot(d - 1)));
    a_.emit(mov64_imm(R2, 1));
    a_.jump(jmp_reg(jop, R0, R1, 0), yes);
    a_.emit(mov64_imm(R2, 0));
    a_.bind(yes);
    a_.emit(stx(BPF_DW, R10, slot(d - 2), R2));
  };
  auto division = [&](uint8_t alu, bool is_signed) {
    int nonzero = a_.new_label();
    a_.emit(ldx(BPF_DW, R1, R10, slot(d - 1)));
    a_.jump(jmp_imm(BPF_JNE, R1, 0, 0), nonzero);
    raise(AX_ERR_DIV_ZERO, pc, is_condition);
    a_.bind(nonzero);
    binary(alu, is_signed ? 1 : 0); // off=1: signed div/mod (BPF cpu v4)
  };
  // Shift counts >= 64 give 0 (or the sign fill), as the VM defines them.
  auto shift = [&](uint8_t alu) {
    int in_range = a_.new_label(), store = a_.new_label();
    a_.emit(ldx(BPF_DW, R0, R10, slot(d - 2)));
    a_.emit(ldx(BPF_DW, R1, R10, slot(d - 1)));
    a_.jump(jmp_imm(BPF_JLE, R1, 63, 0), in_range);
    if (alu == BPF_ARSH) {
      a_.emit(mov64_imm(R1, 63));
    } else {
      a_.emit(mov64_imm(R0, 0));
      a_.ja(store);
    }
    a_.bind(in_range);
    a_.emit(alu64_reg(alu, R0, R1));
    a_.bind(store);
    a_.emit(stx(BPF_DW, R10, slot(d - 2), R0));
  };
  auto collect_ok = [&]() -> Result<void> {
    if (is_condition)
      return refuse("trace ops in a condition");
    return ok();
  };

  switch (op) {
  case AX_OP_ADD:
    binary(BPF_ADD);
    break;
  case AX_OP_SUB:
    binary(BPF_SUB);
    break;
  case AX_OP_MUL:
    binary(BPF_MUL);
    break;
  case AX_OP_DIV_SIGNED:
    division(BPF_DIV, true);
    break;
  case AX_OP_DIV_UNSIGNED:
    division(BPF_DIV, false);
    break;
  case AX_OP_REM_SIGNED:
    division(BPF_MOD, true);
    break;
  case AX_OP_REM_UNSIGNED:
    division(BPF_MOD, false);
    break;
  case AX_OP_LSH:
    shift(BPF_LSH);
    break;
  case AX_OP_RSH_SIGNED:
    shift(BPF_ARSH);
    break;
  case AX_OP_RSH_UNSIGNED:
    shift(BPF_RSH);
    break;
  case AX_OP_BIT_AND:
    binary(BPF_AND);
    break;
  case AX_OP_BIT_OR:
    binary(BPF_OR);
    break;
  case AX_OP_BIT_XOR:
    binary(BPF_XOR);
    break;
  case AX_OP_EQUAL:
    compare(BPF_JEQ);
    break;
  case AX_OP_LESS_SIGNED:
    compare(BPF_JSLT);
    break;
  case AX_OP_LESS_UNSIGNED:
    compare(BPF_JLT);
    break;
  case AX_OP_LOG_NOT: {
    int zero = a_.new_label();
    a_.emit(ldx(BPF_DW, R0, R10, slot(d - 1)));
    a_.emit(mov64_imm(R1, 1));
    a_.jump(jmp_imm(BPF_JEQ, R0, 0, 0), zero);
    a_.emit(mov64_imm(R1, 0));
    a_.bind(zero);
    a_.emit(stx(BPF_DW, R10, slot(d - 1), R1));
    break;
  }
  case AX_OP_BIT_NOT:
    a_.emit(ldx(BPF_DW, R0, R10, slot(d - 1)));
    a_.emit(alu64_imm(BPF_XOR, R0, -1));
    a_.emit(stx(BPF_DW, R10, slot(d - 1), R0));
    break;
  case AX_OP_EXT:
  case AX_OP_ZERO_EXT:
    if (arg < 1 || arg > 64)
      return refuse("bad ext/zero_ext width");
    if (arg < 64) {
      a_.emit(ldx(BPF_DW, R0, R10, slot(d - 1)));
      a_.emit(alu64_imm(BPF_LSH, R0, int32_t(64 - arg)));
      a_.emit(alu64_imm(op == AX_OP_EXT ? BPF_ARSH : BPF_RSH, R0, int32_t(64 - arg)));
      a_.emit(stx(BPF_DW, R10, slot(d - 1), R0));
    }
    break;
  case AX_OP_REF8:
  case AX_OP_REF16:
  case AX_OP_REF32:
  case AX_OP_REF64: {
    int size = 1 << (op - AX_OP_REF8);
    int readable = a_.new_label();
    a_.emit(ldx(BPF_DW, R3, R10, slot(d - 1)));
    a_.emit(stx(BPF_DW, R10, kAddr, R3));         // scratch here: trace ops set it right before use
    a_.emit(st_imm(BPF_DW, R10, slot(d - 1), 0)); // zero-extends reads shorter than 8
    read_user([&] {
      a_.emit(mov64_reg(R1, R10));
      a_.emit(alu64_imm(BPF_ADD, R1, slot(d - 1)));
      a_.emit(mov64_imm(R2, size));
      a_.emit(ldx(BPF_DW, R3, R10, kAddr));
    });
    a_.jump(jmp_imm(BPF_JEQ, R0, 0, 0), readable);
    raise(AX_ERR_MEM, pc, is_condition);
    a_.bind(readable);
    break;
  }
  case AX_OP_IF_GOTO:
    a_.emit(ldx(BPF_DW, R0, R10, slot(d - 1)));
    a_.jump(jmp_imm(BPF_JNE, R0, 0, 0), pc_labels_.at(uint32_t(arg)));
    break;
  case AX_OP_GOTO:
    a_.ja(pc_labels_.at(uint32_t(arg)));
    break;
  case AX_OP_CONST8:
  case AX_OP_CONST16:
  case AX_OP_CONST32:
  case AX_OP_CONST64:
    store_const(slot(d), arg);
    break;
  case AX_OP_REG:
    if (!register_available(unsigned(arg), opts_))
      return refuse("register " + std::to_string(arg) + " is not visible to a uprobe");
    if (auto r = load_register(R0, unsigned(arg)); !r)
      return r;
    a_.emit(stx(BPF_DW, R10, slot(d), R0));
    break;
  case AX_OP_END:
    if (is_condition) {
      if (d > 0)
        a_.emit(ldx(BPF_DW, R0, R10, slot(d - 1)));
      else
        a_.emit(mov64_imm(R0, 0));
    }
    a_.ja(end_label);
    break;
  case AX_OP_DUP:
    a_.emit(ldx(BPF_DW, R0, R10, slot(d - 1)));
    a_.emit(stx(BPF_DW, R10, slot(d), R0));
    break;
  case AX_OP_POP:
    break;
  case AX_OP_SWAP:
    a_.emit(ldx(BPF_DW, R0, R10, slot(d - 1)));
    a_.emit(ldx(BPF_DW, R1, R10, slot(d - 2)));
    a_.emit(stx(BPF_DW, R10, slot(d - 1), R1));
    a_.emit(stx(BPF_DW, R10, slot(d - 2), R0));
    break;
  case AX_OP_PICK:
    a_.emit(ldx(BPF_DW, R0, R10, slot(d - 1 - uint32_t(arg))));
    a_.emit(stx(BPF_DW, R10, slot(d), R0));
    break;
  case AX_OP_ROT: // a b c => c a b (gdbserver's order: the top moves to third place)
    a_.emit(ldx(BPF_DW, R0, R10, slot(d - 3)));
    a_.emit(ldx(BPF_DW, R1, R10, slot(d - 2)));
    a_.emit(ldx(BPF_DW, R2, R10, slot(d - 1)));
    a_.emit(stx(BPF_DW, R10, slot(d - 3), R2));
    a_.emit(stx(BPF_DW, R10, slot(d - 2), R0));
    a_.emit(stx(BPF_DW, R10, slot(d - 1), R1));
    break;
  case AX_OP_GETV: {
    auto idx = tsv(uint32_t(arg));
    if (!idx)
      return idx.error();
    // `$v = $v + K` (getv; const K; add; setv) becomes one atomic add, so hits
    // on several CPUs do not lose updates.
    uint32_t p1 = pc + 3;
    bool timestamp = opts_.timestamp_tsv && uint32_t(arg) == *opts_.timestamp_tsv;
    if (!timestamp && p1 < code.size() && code[p1] >= AX_OP_CONST8 && code[p1] <= AX_OP_CONST32) {
      uint32_t p2 = p1 + insn_size(code, p1), p3 = p2 + 1;
      if (p3 + 2 < code.size() && code[p2] == AX_OP_ADD && code[p3] == AX_OP_SETV &&
          operand(code, p3) == arg && !jump_target_[p1] && !jump_target_[p2] && !jump_target_[p3]) {
        uint64_t k = operand(code, p1);
        a_.emit(ld_map_value(R1, maps_.tsv_fd, *idx * 8));
        load_const(R0, k);
        a_.emit(mov64_reg(R2, R0));
        a_.emit(atomic64(BPF_ADD | BPF_FETCH, R1, 0, R0));
        a_.emit(alu64_reg(BPF_ADD, R0, R2));
        a_.emit(stx(BPF_DW, R10, slot(d), R0));
        next_pc = p3 + 3;
        return ok();
      }
    }
    load_tsv(R0, uint32_t(arg), *idx);
    a_.emit(stx(BPF_DW, R10, slot(d), R0));
    break;
  }
  case AX_OP_SETV: {
    if (opts_.timestamp_tsv && uint32_t(arg) == *opts_.timestamp_tsv)
      return refuse("$trace_timestamp cannot be assigned");
    auto idx = tsv(uint32_t(arg));
    if (!idx)
      return idx.error();
    a_.emit(ld_map_value(R1, maps_.tsv_fd, *idx * 8));
    a_.emit(ldx(BPF_DW, R0, R10, slot(d - 1)));
    a_.emit(stx(BPF_DW, R1, 0, R0));
    break;
  }
  case AX_OP_TRACEV: {
    if (auto r = collect_ok(); !r)
      return r;
    auto idx = tsv(uint32_t(arg));
    if (!idx)
      return idx.error();
    tsv_block(uint32_t(arg), *idx);
    break;
  }
  case AX_OP_TRACE_QUICK:
  case AX_OP_TRACE16:
    if (auto r = collect_ok(); !r)
      return r;
    a_.emit(ldx(BPF_DW, R0, R10, slot(d - 1)));
    a_.emit(stx(BPF_DW, R10, kAddr, R0));
    memory_block_const(uint32_t(arg), pc);
    break;
  case AX_OP_TRACE:
  case AX_OP_TRACENZ: {
    if (auto r = collect_ok(); !r)
      return r;
    a_.emit(ldx(BPF_DW, R0, R10, slot(d - 2)));
    a_.emit(stx(BPF_DW, R10, kAddr, R0));
    // gdb pushes constant sizes right before `trace`: reserve exactly that.
    std::optional<uint64_t> known;
    if (!jump_target_[pc]) {
      for (uint8_t c : {AX_OP_CONST8, AX_OP_CONST16, AX_OP_CONST32}) {
        uint32_t cb = ax_opinfo(c)->operand_bytes;
        uint32_t at = pc - 1 - cb;
        if (pc >= 1 + cb && e.depth[at] >= 0 && code[at] == c)
          known = operand(code, at);
      }
    }
    if (known && op == AX_OP_TRACE && *known <= kMaxFrameSize) {
      memory_block_const(uint32_t(*known), pc);
      break;
    }
    // Refusals name the size asked for and the limit it passes (the engine
    // shows them on gdb's console when it falls back to another collector).
    if (known && op == AX_OP_TRACE)
      return refuse("collecting " + std::to_string(*known) + " bytes in one hit (" + op_name(op) +
                    "): an eBPF frame holds at most " + std::to_string(kMaxFrameSize) + " bytes");
    if (known && *known > GT_TFRAME_MEM_MAX)
      return refuse("collecting a string of up to " + std::to_string(*known) + " bytes (" +
                    op_name(op) + "): one memory block holds at most " +
                    std::to_string(GT_TFRAME_MEM_MAX) + " bytes");
    uint32_t max = known && *known <= kDynamicTraceMax ? uint32_t(*known) : kDynamicTraceMax;
    int fits = a_.new_label();
    a_.emit(ldx(BPF_DW, R5, R10, slot(d - 1)));
    a_.jump(jmp_imm(BPF_JLE, R5, int32_t(max), 0), fits);
    raise(AX_ERR_TRACE, pc, false);
    a_.bind(fits);
    memory_block_dynamic(R5, op == AX_OP_TRACENZ, max, pc);
    break;
  }
  default:
    return refuse(std::string("agent-expression op '") + op_name(op) + "' is not supported");
  }
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
  return Generator(tp, maps, opts).run();
}

} // namespace gdbtrace::bpf
