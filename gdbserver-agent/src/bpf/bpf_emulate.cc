#include "bpf/bpf_emulate.h"

#include <cstddef>

#include "abi/amd64_regs.h"
#include "bpf/bpf_codegen.h"

namespace gdbtrace::bpf {
namespace {

constexpr int32_t kTrapFlag = 0x100;
constexpr int32_t kUser64BitCodeSegment = 0x33; // __USER_CS on x86-64
constexpr int32_t kArithFlags = 0x8d5;          // CF PF AF ZF SF OF

int16_t reg_at(unsigned gdb_regno) {
  return int16_t(pt_regs_offset(gdb_regno));
}

void load_const(Assembler& a, uint8_t dst, uint64_t v) {
  int64_t s = int64_t(v);
  if (s >= INT32_MIN && s <= INT32_MAX)
    a.emit(mov64_imm(dst, int32_t(s)));
  else
    a.emit(ld_imm64(dst, v));
}

// DST &= the operand mask: a 32-bit result is zero-extended (x86-64 rules).
void truncate(Assembler& a, uint8_t dst, uint32_t width) {
  if (width == 4)
    a.emit(mov32_reg(dst, dst));
}

// r1 = the user memory at address r3 (WIDTH bytes, zero-extended), or OUT when
// it cannot be read without a fault (the kernel's single-step then takes it).
void read_operand(Assembler& a, uint32_t width, int16_t scratch, int out) {
  a.emit(mov64_reg(R1, R10));
  a.emit(alu64_imm(BPF_ADD, R1, scratch));
  a.emit(mov64_imm(R2, int32_t(width)));
  a.emit(call(BPF_FUNC_probe_read_user));
  a.jump(jmp_imm(BPF_JNE, R0, 0, 0), out);
  a.emit(ldx(width == 8 ? BPF_DW : BPF_W, R1, R10, scratch));
}

// r3 |= BIT when bit (BITS - 1) of r4 is set; clobbers r4.
void sign_bit_to_flag(Assembler& a, uint32_t width, int32_t bit_shift) {
  a.emit(alu64_imm(BPF_RSH, R4, int32_t(width * 8 - 1)));
  a.emit(alu64_imm(BPF_AND, R4, 1));
  if (bit_shift)
    a.emit(alu64_imm(BPF_LSH, R4, bit_shift));
  a.emit(alu64_reg(BPF_OR, R3, R4));
}

// dst op= imm with the arithmetic flags, as set_arith_flags in shared/x86/emulate.c:
// r1 = a, r5 = b, r2 = the result, r3 = eflags.
void add_sub(Assembler& a, const gdbtrace_emu& e, uint8_t regs) {
  bool sub = e.op == GDBTRACE_EMU_SUB_IMM;
  uint64_t mask = e.width == 8 ? ~0ull : 0xffffffffull;
  a.emit(ldx(BPF_DW, R1, regs, reg_at(e.dst)));
  truncate(a, R1, e.width);
  load_const(a, R5, uint64_t(e.imm) & mask);
  a.emit(mov64_reg(R2, R1));
  a.emit(alu64_reg(sub ? BPF_SUB : BPF_ADD, R2, R5));
  truncate(a, R2, e.width);
  a.emit(ldx(BPF_DW, R3, regs, reg_at(GT_EFLAGS)));
  a.emit(alu64_imm(BPF_AND, R3, ~kArithFlags));

  int no_carry = a.new_label();
  if (sub) // CF: borrow, a < b
    a.jump(jmp_reg(BPF_JGE, R1, R5, 0), no_carry);
  else // CF: carry out, r < a
    a.jump(jmp_reg(BPF_JGE, R2, R1, 0), no_carry);
  a.emit(alu64_imm(BPF_OR, R3, 0x1));
  a.bind(no_carry);

  // PF: set when the low byte of the result has an even number of set bits.
  a.emit(mov64_reg(R4, R2));
  a.emit(alu64_imm(BPF_AND, R4, 0xff));
  for (int32_t shift : {4, 2, 1}) {
    a.emit(mov64_reg(R0, R4));
    a.emit(alu64_imm(BPF_RSH, R0, shift));
    a.emit(alu64_reg(BPF_XOR, R4, R0));
  }
  a.emit(alu64_imm(BPF_AND, R4, 1));
  a.emit(alu64_imm(BPF_XOR, R4, 1));
  a.emit(alu64_imm(BPF_LSH, R4, 2));
  a.emit(alu64_reg(BPF_OR, R3, R4));

  // AF: carry out of bit 3, which is bit 4 of a ^ b ^ r (the flag's own position).
  a.emit(mov64_reg(R4, R1));
  a.emit(alu64_reg(BPF_XOR, R4, R5));
  a.emit(alu64_reg(BPF_XOR, R4, R2));
  a.emit(alu64_imm(BPF_AND, R4, 0x10));
  a.emit(alu64_reg(BPF_OR, R3, R4));

  int nonzero = a.new_label();
  a.jump(jmp_imm(BPF_JNE, R2, 0, 0), nonzero);
  a.emit(alu64_imm(BPF_OR, R3, 0x40)); // ZF
  a.bind(nonzero);

  a.emit(mov64_reg(R4, R2));
  sign_bit_to_flag(a, e.width, 7); // SF

  // OF: sub: (a ^ b) & (a ^ r); add: (a ^ r) & (b ^ r); sign bit of that.
  a.emit(mov64_reg(R4, R1));
  a.emit(alu64_reg(BPF_XOR, R4, sub ? R5 : R2));
  a.emit(mov64_reg(R0, sub ? R1 : R5));
  a.emit(alu64_reg(BPF_XOR, R0, R2));
  a.emit(alu64_reg(BPF_AND, R4, R0));
  sign_bit_to_flag(a, e.width, 11);

  a.emit(stx(BPF_DW, regs, reg_at(GT_EFLAGS), R3));
  a.emit(stx(BPF_DW, regs, reg_at(e.dst), R2));
}

// The conditions under which emulating is faithful (see the header); OUT when one fails.
void guards(Assembler& a, const EmulationSite& s, uint8_t regs, int16_t scratch, int out) {
  if (s.flag_map_fd >= 0) {
    a.emit(ld_map_value(R1, s.flag_map_fd, s.flag_offset));
    a.emit(ldx(BPF_DW, R1, R1, 0));
    a.jump(jmp_imm(BPF_JEQ, R1, 0, 0), out);
  }
  a.emit(ldx(BPF_DW, R1, regs, reg_at(GT_RIP)));
  load_const(a, R2, s.address);
  a.jump(jmp_reg(BPF_JNE, R1, R2, 0), out);
  a.emit(ldx(BPF_DW, R1, regs, reg_at(GT_EFLAGS)));
  a.emit(alu64_imm(BPF_AND, R1, kTrapFlag));
  a.jump(jmp_imm(BPF_JNE, R1, 0, 0), out);
  a.emit(ldx(BPF_H, R1, regs, reg_at(GT_CS))); // the selector (FRED keeps more in csx)
  a.jump(jmp_imm(BPF_JNE, R1, kUser64BitCodeSegment, 0), out);
  // current->thread.ptrace_dr7: what the thread's tracer armed in DR7.
  a.emit(call(BPF_FUNC_get_current_task));
  a.emit(mov64_reg(R3, R0));
  a.emit(alu64_imm(BPF_ADD, R3, int32_t(s.task_dr7_offset)));
  a.emit(mov64_reg(R1, R10));
  a.emit(alu64_imm(BPF_ADD, R1, scratch));
  a.emit(mov64_imm(R2, 8));
  a.emit(call(BPF_FUNC_probe_read_kernel));
  a.jump(jmp_imm(BPF_JNE, R0, 0, 0), out);
  a.emit(ldx(BPF_DW, R1, R10, scratch));
  a.jump(jmp_imm(BPF_JNE, R1, 0, 0), out);
}

} // namespace

bool bpf_can_emulate(const gdbtrace_emu& e) {
  if (e.op == GDBTRACE_EMU_ENDBR)
    return e.insn_len == 4;
  switch (e.op) {
  case GDBTRACE_EMU_MOV_REG_REG:
  case GDBTRACE_EMU_ADD_IMM:
  case GDBTRACE_EMU_SUB_IMM:
  case GDBTRACE_EMU_MOV_IMM:
  case GDBTRACE_EMU_LEA_RIP:
  case GDBTRACE_EMU_LOAD_RIP:
  case GDBTRACE_EMU_LOAD:
    return (e.width == 4 || e.width == 8) && e.dst < 16 && e.src < 16 && e.insn_len > 0;
  default:
    return false;
  }
}

void emit_emulation(Assembler& a, const EmulationSite& s, uint8_t regs, int16_t scratch, int out) {
  const gdbtrace_emu& e = s.recipe;
  uint64_t mask = e.width == 8 ? ~0ull : 0xffffffffull;
  uint64_t next = s.address + e.insn_len; // ip == address was checked
  guards(a, s, regs, scratch, out);
  switch (e.op) {
  case GDBTRACE_EMU_ENDBR:
    break;
  case GDBTRACE_EMU_MOV_REG_REG:
    a.emit(ldx(BPF_DW, R1, regs, reg_at(e.src)));
    truncate(a, R1, e.width);
    a.emit(stx(BPF_DW, regs, reg_at(e.dst), R1));
    break;
  case GDBTRACE_EMU_ADD_IMM:
  case GDBTRACE_EMU_SUB_IMM:
    add_sub(a, e, regs);
    break;
  case GDBTRACE_EMU_MOV_IMM:
    load_const(a, R1, uint64_t(e.imm) & mask);
    a.emit(stx(BPF_DW, regs, reg_at(e.dst), R1));
    break;
  case GDBTRACE_EMU_LEA_RIP:
    load_const(a, R1, (next + uint64_t(e.imm)) & mask);
    a.emit(stx(BPF_DW, regs, reg_at(e.dst), R1));
    break;
  case GDBTRACE_EMU_LOAD_RIP:
    load_const(a, R3, next + uint64_t(e.imm));
    read_operand(a, e.width, scratch, out);
    a.emit(stx(BPF_DW, regs, reg_at(e.dst), R1));
    break;
  case GDBTRACE_EMU_LOAD:
    a.emit(ldx(BPF_DW, R3, regs, reg_at(e.src)));
    load_const(a, R4, uint64_t(e.imm));
    a.emit(alu64_reg(BPF_ADD, R3, R4));
    read_operand(a, e.width, scratch, out);
    a.emit(stx(BPF_DW, regs, reg_at(e.dst), R1));
    break;
  default: // bpf_can_emulate() said no: never emitted
    a.ja(out);
    return;
  }
  load_const(a, R1, next);
  a.emit(stx(BPF_DW, regs, reg_at(GT_RIP), R1));
}

} // namespace gdbtrace::bpf
