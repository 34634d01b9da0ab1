// Builders for raw eBPF instructions (struct bpf_insn from <linux/bpf.h>).
//
// The kernel's BPF_MOV64_IMM()-style macros live in a kernel-internal header
// (include/linux/filter.h) that neither the uapi nor libbpf ships, so the code
// generator uses these equivalents.
#pragma once

#include <linux/bpf.h>

#include <cstdint>

namespace gdbtrace::bpf {

constexpr uint8_t R0 = 0, R1 = 1, R2 = 2, R3 = 3, R4 = 4, R5 = 5, R6 = 6, R7 = 7, R8 = 8, R9 = 9,
                  R10 = 10;

inline bpf_insn insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
  bpf_insn i{};
  i.code = code;
  i.dst_reg = dst & 0xf;
  i.src_reg = src & 0xf;
  i.off = off;
  i.imm = imm;
  return i;
}

// dst = dst OP src / imm (64-bit ALU). OFF selects signed div/mod (cpu v4).
inline bpf_insn alu64_reg(uint8_t op, uint8_t dst, uint8_t src, int16_t off = 0) {
  return insn(BPF_ALU64 | op | BPF_X, dst, src, off, 0);
}
inline bpf_insn alu64_imm(uint8_t op, uint8_t dst, int32_t imm) {
  return insn(BPF_ALU64 | op | BPF_K, dst, 0, 0, imm);
}
inline bpf_insn mov64_reg(uint8_t dst, uint8_t src) {
  return alu64_reg(BPF_MOV, dst, src);
}
inline bpf_insn mov64_imm(uint8_t dst, int32_t imm) {
  return alu64_imm(BPF_MOV, dst, imm);
}
// 32-bit move: zero-extends into the upper half.
inline bpf_insn mov32_reg(uint8_t dst, uint8_t src) {
  return insn(BPF_ALU | BPF_MOV | BPF_X, dst, src, 0, 0);
}

// *(size *)(dst + off) = src / imm;  dst = *(size *)(src + off)
inline bpf_insn stx(uint8_t size, uint8_t dst, int16_t off, uint8_t src) {
  return insn(BPF_STX | size | BPF_MEM, dst, src, off, 0);
}
inline bpf_insn st_imm(uint8_t size, uint8_t dst, int16_t off, int32_t imm) {
  return insn(BPF_ST | size | BPF_MEM, dst, 0, off, imm);
}
inline bpf_insn ldx(uint8_t size, uint8_t dst, uint8_t src, int16_t off) {
  return insn(BPF_LDX | size | BPF_MEM, dst, src, off, 0);
}
// Atomic op on *(u64 *)(dst + off) with src (BPF_ADD, BPF_ADD|BPF_FETCH, BPF_XCHG, ...).
inline bpf_insn atomic64(int32_t op, uint8_t dst, int16_t off, uint8_t src) {
  return insn(BPF_STX | BPF_DW | BPF_ATOMIC, dst, src, off, op);
}

// Conditional jumps (64-bit compare) and the unconditional one; OFF in instructions.
inline bpf_insn jmp_imm(uint8_t op, uint8_t dst, int32_t imm, int16_t off) {
  return insn(BPF_JMP | op | BPF_K, dst, 0, off, imm);
}
inline bpf_insn jmp_reg(uint8_t op, uint8_t dst, uint8_t src, int16_t off) {
  return insn(BPF_JMP | op | BPF_X, dst, src, off, 0);
}
inline bpf_insn ja(int16_t off) {
  return insn(BPF_JMP | BPF_JA, 0, 0, off, 0);
}
inline bpf_insn call(int32_t helper) {
  return insn(BPF_JMP | BPF_CALL, 0, 0, 0, helper);
}
inline bpf_insn exit_insn() {
  return insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
}

// 64-bit immediate loads take two instruction slots.
struct Wide {
  bpf_insn lo, hi;
};
inline Wide ld_imm64(uint8_t dst, uint64_t value, uint8_t src = 0) {
  return {insn(BPF_LD | BPF_DW | BPF_IMM, dst, src, 0, int32_t(uint32_t(value))),
          insn(0, 0, 0, 0, int32_t(uint32_t(value >> 32)))};
}
// dst = map (for helper arguments).
inline Wide ld_map_fd(uint8_t dst, int fd) {
  return {insn(BPF_LD | BPF_DW | BPF_IMM, dst, BPF_PSEUDO_MAP_FD, 0, fd), insn(0, 0, 0, 0, 0)};
}
// dst = address of byte OFFSET of the (single) value of array map FD.
inline Wide ld_map_value(uint8_t dst, int fd, uint32_t offset) {
  return {insn(BPF_LD | BPF_DW | BPF_IMM, dst, BPF_PSEUDO_MAP_VALUE, 0, fd),
          insn(0, 0, 0, 0, int32_t(offset))};
}

} // namespace gdbtrace::bpf
