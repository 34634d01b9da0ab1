#include "target/step_in_place.h"

#include <cstddef>
#include <cstring>
#include <sys/uio.h>

extern "C" {
#include "x86/emulate.h"
}

namespace gdbtrace {
namespace {

constexpr unsigned long long kUser64BitCodeSegment = 0x33; // __USER_CS on x86-64

// pt_regs (kernel field order, x86/emulate_user.h) and ptrace's user_regs_struct
// begin with the same 21 registers in the same order.
static_assert(offsetof(user_regs_struct, rip) == offsetof(pt_regs, ip));
static_assert(offsetof(user_regs_struct, eflags) == offsetof(pt_regs, flags));
static_assert(offsetof(user_regs_struct, ss) == offsetof(pt_regs, ss));
static_assert(sizeof(pt_regs) == offsetof(user_regs_struct, fs_base));

bool read_tracee(void* ctx, void* dst, u64 addr, u32 len) {
  iovec local{dst, len}, remote{reinterpret_cast<void*>(addr), len};
  return process_vm_readv(*static_cast<pid_t*>(ctx), &local, 1, &remote, 1, 0) == ssize_t(len);
}

bool write_tracee(void* ctx, u64 addr, const void* src, u32 len) {
  iovec local{const_cast<void*>(src), len}, remote{reinterpret_cast<void*>(addr), len};
  return process_vm_writev(*static_cast<pid_t*>(ctx), &local, 1, &remote, 1, 0) == ssize_t(len);
}

// The module's recipes (shared/x86/emulate.c), memory operands in the tracee.
bool apply_module_recipe(std::span<const uint8_t> insn, user_regs_struct& regs, pid_t pid) {
  gdbtrace_emu emu;
  if (gt_emu_decode(insn.data(), u32(insn.size()), &emu) != 0)
    return false;
  pt_regs pr;
  std::memcpy(&pr, &regs, sizeof pr);
  const struct gt_emu_memory tracee { read_tracee, write_tracee, &pid };
  const struct gt_emu_memory* saved = gt_emu_memory;
  gt_emu_memory = &tracee;
  bool done = gt_emu_apply(&emu, &pr);
  gt_emu_memory = saved;
  if (done)
    std::memcpy(&regs, &pr, sizeof pr);
  return done;
}

// nop (90), xchg-free 66 90, and the multi-byte nop 0f 1f /0 (it never
// touches its memory operand; its length follows the module decoder's ModRM
// rule). Length, or 0.
unsigned nop_length(std::span<const uint8_t> insn) {
  size_t i = 0;
  while (i < insn.size() && insn[i] == 0x66)
    i++;
  if (i < insn.size() && insn[i] == 0x90)
    return unsigned(i + 1);
  if (i + 2 < insn.size() && insn[i] == 0x0f && insn[i + 1] == 0x1f &&
      ((insn[i + 2] >> 3) & 7) == 0) {
    std::span<const uint8_t> rest = insn.subspan(i + 3);
    int n = gt_emu_modrm_operand_len(rest.data(), u32(rest.size()), insn[i + 2]);
    return n < 0 ? 0 : unsigned(i + 3 + size_t(n));
  }
  return 0;
}

// push r64 (50+r, 41 50+r for r8..r15): the usual first instruction of a
// function built with frame pointers.
bool apply_push(std::span<const uint8_t> insn, user_regs_struct& regs, pid_t pid) {
  size_t i = 0;
  bool high = false;
  if (i < insn.size() && (insn[i] & 0xf0) == 0x40) {
    if (insn[i] & 0x0e) // REX.W/R/X change nothing here but are unusual: leave to the CPU
      return false;
    high = insn[i] & 1;
    i++;
  }
  if (i >= insn.size() || insn[i] < 0x50 || insn[i] > 0x57)
    return false;
  static constexpr unsigned long long user_regs_struct::*kRegs[16] = {
      &user_regs_struct::rax, &user_regs_struct::rcx, &user_regs_struct::rdx,
      &user_regs_struct::rbx, &user_regs_struct::rsp, &user_regs_struct::rbp,
      &user_regs_struct::rsi, &user_regs_struct::rdi, &user_regs_struct::r8,
      &user_regs_struct::r9,  &user_regs_struct::r10, &user_regs_struct::r11,
      &user_regs_struct::r12, &user_regs_struct::r13, &user_regs_struct::r14,
      &user_regs_struct::r15};
  uint64_t value = regs.*kRegs[(insn[i] & 7) | (high ? 8 : 0)]; // push rsp pushes the old rsp
  uint64_t sp = regs.rsp - 8;
  if (!write_tracee(&pid, sp, &value, 8))
    return false;
  regs.rsp = sp;
  regs.rip += i + 1;
  return true;
}

} // namespace

InPlace execute_in_place(std::span<const uint8_t> insn, user_regs_struct& regs, pid_t pid) {
  // The recipes decode 64-bit code; in a 32-bit (compat) thread 0x40-0x4f are inc/dec, not REX.
  if (regs.cs != kUser64BitCodeSegment)
    return InPlace::Unsupported;
  if (apply_module_recipe(insn, regs, pid))
    return InPlace::Done;
  if (unsigned len = nop_length(insn)) {
    regs.rip += len;
    return InPlace::Done;
  }
  if (apply_push(insn, regs, pid))
    return InPlace::Done;
  return InPlace::Unsupported;
}

} // namespace gdbtrace
