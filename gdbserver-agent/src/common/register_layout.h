// The register layout gdb sees for one process: its architecture (amd64, or
// i386 for a gcc -m32 program on this x86-64 host) and whether the target
// description has AVX. It gives each remote register number (the order of the
// target description, the 'g' packet and a trace frame's 'R' block) its size,
// its offset and the RegisterBlock register that holds it.
//
// RegisterBlock is always the thread's x86-64 register file (abi/amd64_regs.h);
// an i386 register is the low part of one of its registers (abi/i386_regs.h).
#pragma once

#include <cstdint>
#include <cstring>

#include "abi/i386_regs.h"
#include "common/register_block.h"

namespace gdbtrace {

enum class RegisterArch : uint8_t { Amd64, I386 };

struct RegisterLayout {
  RegisterArch arch = RegisterArch::Amd64;
  bool avx = false;

  bool i386() const { return arch == RegisterArch::I386; }
  // Registers of the target description.
  unsigned count() const {
    if (i386())
      return avx ? GT32_NUM_REGS_AVX : GT32_NUM_REGS_NOAVX;
    return avx ? GT_NUM_REGS_AVX : GT_NUM_REGS_NOAVX;
  }
  unsigned size(unsigned remote) const {
    return i386() ? gt32_reg_size(remote) : gt_reg_size(remote);
  }
  unsigned offset(unsigned remote) const {
    return i386() ? gt32_reg_offset(remote) : gt_reg_offset(remote);
  }
  // Bytes of the 'g' reply / 'R' block.
  unsigned bytes() const { return offset(count()); }
  // The RegisterBlock register REMOTE is (the low part of).
  unsigned block_regno(unsigned remote) const { return i386() ? gt32_to_amd64(remote) : remote; }

  // Copies remote register REMOTE out of BLOCK (SIZE(REMOTE) bytes to OUT).
  void get(const RegisterBlock& block, unsigned remote, uint8_t* out) const {
    std::memcpy(out, block.bytes.data() + gt_reg_offset(block_regno(remote)), size(remote));
  }
  // Stores remote register REMOTE from IN into BLOCK and marks it valid. An
  // i386 general register fills its 64-bit register zero-extended, but eax and
  // orig_eax sign-extended, as gdb's own amd64-linux native code does: the
  // kernel's syscall-restart logic reads orig_rax/rax as 64-bit values.
  void set(RegisterBlock& block, unsigned remote, const void* src) const {
    const auto* in = static_cast<const uint8_t*>(src);
    unsigned regno = block_regno(remote);
    unsigned n = size(remote);
    uint8_t* dst = block.bytes.data() + gt_reg_offset(regno);
    if (n < gt_reg_size(regno)) {
      bool sign = (remote == GT32_EAX || remote == GT32_ORIG_EAX) && (in[n - 1] & 0x80);
      std::memset(dst, sign ? 0xff : 0, gt_reg_size(regno));
    }
    std::memcpy(dst, in, n);
    block.valid.set(regno);
  }
  bool valid(const RegisterBlock& block, unsigned remote) const {
    return block.valid.test(block_regno(remote));
  }
  // BLOCK in this layout's 'g' order: bytes() bytes to OUT (a trace frame's 'R' block).
  void encode(const RegisterBlock& block, uint8_t* out) const {
    if (!i386()) {
      std::memcpy(out, block.bytes.data(), bytes());
      return;
    }
    for (unsigned r = 0; r < count(); r++)
      get(block, r, out + offset(r));
  }
  // The inverse: an 'R' block of bytes() bytes (or fewer: the registers it
  // holds whole) into a RegisterBlock, nothing marked valid.
  RegisterBlock decode(const uint8_t* in, size_t length) const {
    RegisterBlock block;
    for (unsigned r = 0; r < count() && offset(r) + size(r) <= length; r++)
      set(block, r, in + offset(r));
    block.valid.reset();
    return block;
  }
};

} // namespace gdbtrace
