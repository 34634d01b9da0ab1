// The eBPF code generator's inside, shared by its files: the BPF stack layout
// of a generated program and the Generator that emits it. bpf_codegen.cc holds
// the program's pieces, bpf_codegen_blocks.cc the collection blocks,
// bpf_codegen_ops.cc the translation of agent-expression instructions.
// Nothing outside bpf_codegen*.cc includes this.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "abi/amd64_regs.h"
#include "abi/ax_opcodes.h"
#include "abi/tframe.h"
#include "bpf/bpf_asm.h"
#include "bpf/bpf_codegen.h"
#include "bpf/bpf_layout.h"
#include "bpf/bpf_rings.h"

namespace gdbtrace::bpf::codegen {

// BPF stack (offsets from R10). Everything is 8-byte slots.
constexpr int16_t kErrStatus = -8;
constexpr int16_t kErrPc = -16;
constexpr int16_t kKey = -24;     // u32 map key for lookups; also scratch
constexpr int16_t kErrCond = -32; // 1 when the error happened in the condition
constexpr int16_t kAddr = -40;    // address of the memory block being collected
constexpr int16_t kWake = -48;    // bit 0: this frame must wake the reader (pass count reached);
                                  // bit 1: it is in an overflow ring
constexpr int16_t kRing = -56;    // this CPU's ring buffer (map pointer from the ring array)
constexpr int16_t kStackBase = -64;
constexpr uint32_t kMaxAxSlots = (512 + kStackBase) / 8 + 1; // 56
inline int16_t slot(uint32_t i) {
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

inline const char* op_name(uint8_t op) {
  const char* n = ax_op_name(op);
  return n ? n : "?";
}

// Bytes of the instruction at PC (opcode and operands; printf is refused before).
inline uint32_t insn_size(const std::vector<uint8_t>& code, uint32_t pc) {
  return 1u + ax_opinfo(code[pc])->operand_bytes;
}

inline uint64_t operand(const std::vector<uint8_t>& code, uint32_t pc) {
  return ax_operand(&code[pc + 1], ax_opinfo(code[pc])->operand_bytes);
}

inline Error refuse(const std::string& what) {
  return make_error(EOPNOTSUPP, "the eBPF collector cannot run this tracepoint: " + what);
}

// One agent-expression instruction as the translator sees it: at PC, with D
// values on the stack (the top is slot(D-1)).
struct Insn {
  const AgentExpr& e;
  uint32_t pc;
  uint32_t d;
  bool is_condition;
  uint8_t op;
  uint64_t arg;
};

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
  std::vector<size_t> reserve_record(int fail_label);
  void reserve_in(int outer_fd, int fail_label, std::vector<size_t>& sizes_at);
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
  // One family of AX instructions each (bpf_codegen_ops.cc).
  Result<void> arithmetic(const Insn& in);
  void alu_binary(const Insn& in, uint8_t alu, int16_t off = 0);
  void alu_compare(const Insn& in, uint8_t jop);
  void alu_division(const Insn& in, uint8_t alu, bool is_signed);
  void alu_shift(const Insn& in, uint8_t alu);
  Result<void> stack_op(const Insn& in);
  void dereference(const Insn& in);
  void control(const Insn& in, int end_label);
  Result<void> tsv_op(const Insn& in, uint32_t& next_pc);
  bool fused_tsv_add(const Insn& in, uint32_t index, uint32_t& next_pc);
  Result<void> trace_op(const Insn& in);
  Result<void> trace_sized(const Insn& in);
  void raise(int status, uint32_t pc, bool in_condition);
  Result<void> load_register(uint8_t dst, unsigned regno);
  Result<uint32_t> tsv(uint32_t number);
  void load_tsv(uint8_t dst, uint32_t number, uint32_t index);
  void store_const(int16_t off, uint64_t v);
  void load_const(uint8_t dst, uint64_t v);
  void stats_add(uint32_t field_offset);
  void lookup_key(int map_fd, int missing_label);
  void load_control_slot();
  void load_slot(uint8_t dst);
  void store_tp_number(uint8_t size, int16_t off);

  const Tracepoint& tp_;
  const CodegenMaps& maps_;
  const CodegenOptions& opts_;
  Assembler a_;
  Program out_;
  std::vector<size_t> reserve_at_; // the frame's reservations' size operands (run() patches)
  size_t wake_window_at_ = 0;
  int exit_ = -1, drop_ = -1, cond_error_ = -1, action_error_ = -1, error_common_ = -1;
  std::map<uint32_t, int> pc_labels_;
  std::vector<bool> jump_target_; // of the expression being translated
};

} // namespace gdbtrace::bpf::codegen
