// The eBPF code generator's translation of agent expressions: one function per
// family of AX instructions (arithmetic, stack, memory, control flow, trace
// state variables, collection). ax_verify proved the program before (jump
// targets, one stack depth per instruction, recorded in AgentExpr::depth), and
// check_tracepoint() refused what the translator cannot do, so each
// instruction is translated alone with its stack depth known.
#include "bpf/bpf_codegen_generator.h"

namespace gdbtrace::bpf::codegen {

// Labels for the jump targets of reachable jumps.
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

// One AX instruction at PC with D values on the stack, handed to its family.
Result<void> Generator::op(const AgentExpr& e, uint32_t pc, uint32_t d, bool is_condition,
                           int end_label, uint32_t& next_pc) {
  const Insn in{e, pc, d, is_condition, e.code[pc], operand(e.code, pc)};
  switch (in.op) {
  case AX_OP_CONST8:
  case AX_OP_CONST16:
  case AX_OP_CONST32:
  case AX_OP_CONST64:
  case AX_OP_REG:
  case AX_OP_DUP:
  case AX_OP_POP:
  case AX_OP_SWAP:
  case AX_OP_PICK:
  case AX_OP_ROT:
    return stack_op(in);
  case AX_OP_REF8:
  case AX_OP_REF16:
  case AX_OP_REF32:
  case AX_OP_REF64:
    dereference(in);
    return ok();
  case AX_OP_IF_GOTO:
  case AX_OP_GOTO:
  case AX_OP_END:
    control(in, end_label);
    return ok();
  case AX_OP_GETV:
  case AX_OP_SETV:
    return tsv_op(in, next_pc);
  case AX_OP_TRACEV:
  case AX_OP_TRACE_QUICK:
  case AX_OP_TRACE16:
  case AX_OP_TRACE:
  case AX_OP_TRACENZ:
    return trace_op(in);
  default: // the rest compute a value from values: arithmetic() knows them
    return arithmetic(in);
  }
}

// --- arithmetic: the two top values (or the top one) in, one value out ---

void Generator::alu_binary(const Insn& in, uint8_t alu, int16_t off) {
  a_.emit(ldx(BPF_DW, R0, R10, slot(in.d - 2)));
  a_.emit(ldx(BPF_DW, R1, R10, slot(in.d - 1)));
  a_.emit(alu64_reg(alu, R0, R1, off));
  a_.emit(stx(BPF_DW, R10, slot(in.d - 2), R0));
}

void Generator::alu_compare(const Insn& in, uint8_t jop) {
  int yes = a_.new_label();
  a_.emit(ldx(BPF_DW, R0, R10, slot(in.d - 2)));
  a_.emit(ldx(BPF_DW, R1, R10, slot(in.d - 1)));
  a_.emit(mov64_imm(R2, 1));
  a_.jump(jmp_reg(jop, R0, R1, 0), yes);
  a_.emit(mov64_imm(R2, 0));
  a_.bind(yes);
  a_.emit(stx(BPF_DW, R10, slot(in.d - 2), R2));
}

void Generator::alu_division(const Insn& in, uint8_t alu, bool is_signed) {
  int nonzero = a_.new_label();
  a_.emit(ldx(BPF_DW, R1, R10, slot(in.d - 1)));
  a_.jump(jmp_imm(BPF_JNE, R1, 0, 0), nonzero);
  raise(AX_ERR_DIV_ZERO, in.pc, in.is_condition);
  a_.bind(nonzero);
  alu_binary(in, alu, is_signed ? 1 : 0); // off=1: signed div/mod (BPF cpu v4)
}

// Shift counts >= 64 give 0 (or the sign fill), as the VM defines them.
void Generator::alu_shift(const Insn& in, uint8_t alu) {
  int in_range = a_.new_label(), store = a_.new_label();
  a_.emit(ldx(BPF_DW, R0, R10, slot(in.d - 2)));
  a_.emit(ldx(BPF_DW, R1, R10, slot(in.d - 1)));
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
  a_.emit(stx(BPF_DW, R10, slot(in.d - 2), R0));
}

Result<void> Generator::arithmetic(const Insn& in) {
  switch (in.op) {
  case AX_OP_ADD:
    alu_binary(in, BPF_ADD);
    break;
  case AX_OP_SUB:
    alu_binary(in, BPF_SUB);
    break;
  case AX_OP_MUL:
    alu_binary(in, BPF_MUL);
    break;
  case AX_OP_DIV_SIGNED:
  case AX_OP_DIV_UNSIGNED:
    alu_division(in, BPF_DIV, in.op == AX_OP_DIV_SIGNED);
    break;
  case AX_OP_REM_SIGNED:
  case AX_OP_REM_UNSIGNED:
    alu_division(in, BPF_MOD, in.op == AX_OP_REM_SIGNED);
    break;
  case AX_OP_LSH:
    alu_shift(in, BPF_LSH);
    break;
  case AX_OP_RSH_SIGNED:
    alu_shift(in, BPF_ARSH);
    break;
  case AX_OP_RSH_UNSIGNED:
    alu_shift(in, BPF_RSH);
    break;
  case AX_OP_BIT_AND:
    alu_binary(in, BPF_AND);
    break;
  case AX_OP_BIT_OR:
    alu_binary(in, BPF_OR);
    break;
  case AX_OP_BIT_XOR:
    alu_binary(in, BPF_XOR);
    break;
  case AX_OP_EQUAL:
    alu_compare(in, BPF_JEQ);
    break;
  case AX_OP_LESS_SIGNED:
    alu_compare(in, BPF_JSLT);
    break;
  case AX_OP_LESS_UNSIGNED:
    alu_compare(in, BPF_JLT);
    break;
  case AX_OP_LOG_NOT: {
    int zero = a_.new_label();
    a_.emit(ldx(BPF_DW, R0, R10, slot(in.d - 1)));
    a_.emit(mov64_imm(R1, 1));
    a_.jump(jmp_imm(BPF_JEQ, R0, 0, 0), zero);
    a_.emit(mov64_imm(R1, 0));
    a_.bind(zero);
    a_.emit(stx(BPF_DW, R10, slot(in.d - 1), R1));
    break;
  }
  case AX_OP_BIT_NOT:
    a_.emit(ldx(BPF_DW, R0, R10, slot(in.d - 1)));
    a_.emit(alu64_imm(BPF_XOR, R0, -1));
    a_.emit(stx(BPF_DW, R10, slot(in.d - 1), R0));
    break;
  case AX_OP_EXT:
  case AX_OP_ZERO_EXT:
    if (in.arg < 1 || in.arg > 64)
      return refuse("bad ext/zero_ext width");
    if (in.arg < 64) {
      a_.emit(ldx(BPF_DW, R0, R10, slot(in.d - 1)));
      a_.emit(alu64_imm(BPF_LSH, R0, int32_t(64 - in.arg)));
      a_.emit(alu64_imm(in.op == AX_OP_EXT ? BPF_ARSH : BPF_RSH, R0, int32_t(64 - in.arg)));
      a_.emit(stx(BPF_DW, R10, slot(in.d - 1), R0));
    }
    break;
  default:
    return refuse(std::string("agent-expression op '") + op_name(in.op) + "' is not supported");
  }
  return ok();
}

// --- the value stack: constants, registers, dup/pop/swap/pick/rot ---

Result<void> Generator::stack_op(const Insn& in) {
  const uint32_t d = in.d;
  switch (in.op) {
  case AX_OP_REG:
    if (!register_available(unsigned(in.arg), opts_))
      return refuse("register " + std::to_string(in.arg) + " is not visible to a uprobe");
    if (auto r = load_register(R0, unsigned(in.arg)); !r)
      return r;
    a_.emit(stx(BPF_DW, R10, slot(d), R0));
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
    a_.emit(ldx(BPF_DW, R0, R10, slot(d - 1 - uint32_t(in.arg))));
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
  default: // AX_OP_CONST8 .. AX_OP_CONST64
    store_const(slot(d), in.arg);
    break;
  }
  return ok();
}

// --- memory: ref8/16/32/64 replace an address by what it points to ---

void Generator::dereference(const Insn& in) {
  int size = 1 << (in.op - AX_OP_REF8);
  int readable = a_.new_label();
  a_.emit(ldx(BPF_DW, R3, R10, slot(in.d - 1)));
  a_.emit(stx(BPF_DW, R10, kAddr, R3)); // scratch here: trace ops set it right before use
  a_.emit(st_imm(BPF_DW, R10, slot(in.d - 1), 0)); // zero-extends reads shorter than 8
  read_user([&] {
    a_.emit(mov64_reg(R1, R10));
    a_.emit(alu64_imm(BPF_ADD, R1, slot(in.d - 1)));
    a_.emit(mov64_imm(R2, size));
    a_.emit(ldx(BPF_DW, R3, R10, kAddr));
  });
  a_.jump(jmp_imm(BPF_JEQ, R0, 0, 0), readable);
  raise(AX_ERR_MEM, in.pc, in.is_condition);
  a_.bind(readable);
}

// --- control flow: if_goto, goto, end ---

void Generator::control(const Insn& in, int end_label) {
  switch (in.op) {
  case AX_OP_IF_GOTO:
    a_.emit(ldx(BPF_DW, R0, R10, slot(in.d - 1)));
    a_.jump(jmp_imm(BPF_JNE, R0, 0, 0), pc_labels_.at(uint32_t(in.arg)));
    break;
  case AX_OP_GOTO:
    a_.ja(pc_labels_.at(uint32_t(in.arg)));
    break;
  default: // AX_OP_END: a condition's value goes to r0
    if (in.is_condition) {
      if (in.d > 0)
        a_.emit(ldx(BPF_DW, R0, R10, slot(in.d - 1)));
      else
        a_.emit(mov64_imm(R0, 0));
    }
    a_.ja(end_label);
    break;
  }
}

// --- trace state variables: getv, setv ---

// `$v = $v + K` (getv; const K; add; setv) becomes one atomic add, so hits on
// several CPUs do not lose updates. True when the four instructions were
// emitted as one (NEXT_PC then skips them).
bool Generator::fused_tsv_add(const Insn& in, uint32_t index, uint32_t& next_pc) {
  const auto& code = in.e.code;
  uint32_t p1 = in.pc + 3;
  if (p1 >= code.size() || code[p1] < AX_OP_CONST8 || code[p1] > AX_OP_CONST32)
    return false;
  uint32_t p2 = p1 + insn_size(code, p1), p3 = p2 + 1;
  if (p3 + 2 >= code.size() || code[p2] != AX_OP_ADD || code[p3] != AX_OP_SETV ||
      operand(code, p3) != in.arg || jump_target_[p1] || jump_target_[p2] || jump_target_[p3])
    return false;
  uint64_t k = operand(code, p1);
  a_.emit(ld_map_value(R1, maps_.tsv_fd, index * 8));
  load_const(R0, k);
  a_.emit(mov64_reg(R2, R0));
  a_.emit(atomic64(BPF_ADD | BPF_FETCH, R1, 0, R0));
  a_.emit(alu64_reg(BPF_ADD, R0, R2));
  a_.emit(stx(BPF_DW, R10, slot(in.d), R0));
  next_pc = p3 + 3;
  return true;
}

Result<void> Generator::tsv_op(const Insn& in, uint32_t& next_pc) {
  const uint32_t number = uint32_t(in.arg);
  const bool timestamp = opts_.timestamp_tsv && number == *opts_.timestamp_tsv;
  if (in.op == AX_OP_SETV && timestamp)
    return refuse("$trace_timestamp cannot be assigned");
  auto idx = tsv(number);
  if (!idx)
    return idx.error();
  if (in.op == AX_OP_SETV) {
    a_.emit(ld_map_value(R1, maps_.tsv_fd, *idx * 8));
    a_.emit(ldx(BPF_DW, R0, R10, slot(in.d - 1)));
    a_.emit(stx(BPF_DW, R1, 0, R0));
    return ok();
  }
  if (!timestamp && fused_tsv_add(in, *idx, next_pc))
    return ok();
  load_tsv(R0, number, *idx);
  a_.emit(stx(BPF_DW, R10, slot(in.d), R0));
  return ok();
}

// --- collection: tracev, trace_quick, trace16, trace, tracenz ---

Result<void> Generator::trace_op(const Insn& in) {
  if (in.is_condition)
    return refuse("trace ops in a condition");
  switch (in.op) {
  case AX_OP_TRACEV: {
    auto idx = tsv(uint32_t(in.arg));
    if (!idx)
      return idx.error();
    tsv_block(uint32_t(in.arg), *idx);
    return ok();
  }
  case AX_OP_TRACE_QUICK:
  case AX_OP_TRACE16:
    a_.emit(ldx(BPF_DW, R0, R10, slot(in.d - 1)));
    a_.emit(stx(BPF_DW, R10, kAddr, R0));
    memory_block_const(uint32_t(in.arg), in.pc);
    return ok();
  default: // AX_OP_TRACE, AX_OP_TRACENZ: address and size on the stack
    return trace_sized(in);
  }
}

Result<void> Generator::trace_sized(const Insn& in) {
  const auto& code = in.e.code;
  const uint32_t pc = in.pc;
  a_.emit(ldx(BPF_DW, R0, R10, slot(in.d - 2)));
  a_.emit(stx(BPF_DW, R10, kAddr, R0));
  // gdb pushes constant sizes right before `trace`: reserve exactly that.
  std::optional<uint64_t> known;
  if (!jump_target_[pc]) {
    for (uint8_t c : {AX_OP_CONST8, AX_OP_CONST16, AX_OP_CONST32}) {
      uint32_t cb = ax_opinfo(c)->operand_bytes;
      uint32_t at = pc - 1 - cb;
      if (pc >= 1 + cb && in.e.depth[at] >= 0 && code[at] == c)
        known = operand(code, at);
    }
  }
  if (known && in.op == AX_OP_TRACE && *known <= kMaxFrameSize) {
    memory_block_const(uint32_t(*known), pc);
    return ok();
  }
  // Refusals name the size asked for and the limit it passes (the engine
  // shows them on gdb's console when it falls back to another collector).
  if (known && in.op == AX_OP_TRACE)
    return refuse("collecting " + std::to_string(*known) + " bytes in one hit (" + op_name(in.op) +
                  "): an eBPF frame holds at most " + std::to_string(kMaxFrameSize) + " bytes");
  if (known && *known > GT_TFRAME_MEM_MAX)
    return refuse("collecting a string of up to " + std::to_string(*known) + " bytes (" +
                  op_name(in.op) + "): one memory block holds at most " +
                  std::to_string(GT_TFRAME_MEM_MAX) + " bytes");
  uint32_t max = known && *known <= kDynamicTraceMax ? uint32_t(*known) : kDynamicTraceMax;
  int fits = a_.new_label();
  a_.emit(ldx(BPF_DW, R5, R10, slot(in.d - 1)));
  a_.jump(jmp_imm(BPF_JLE, R5, int32_t(max), 0), fits);
  raise(AX_ERR_TRACE, pc, false);
  a_.bind(fits);
  memory_block_dynamic(R5, in.op == AX_OP_TRACENZ, max, pc);
  return ok();
}

} // namespace gdbtrace::bpf::codegen
