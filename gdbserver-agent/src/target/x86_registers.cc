#include "target/x86_registers.h"

#include "abi/fxsave.h"

#include <array>
#include <cpuid.h>
#include <cstddef>
#include <cstring>
#include <elf.h>
#include <memory>
#include <string>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>

namespace gdbtrace::x86 {
namespace {

Error ptrace_error(const char* what, pid_t tid) {
  int e = errno;
  return make_error(e, std::string(what) + " on thread " + std::to_string(tid) + ": " +
                           std::strerror(e));
}

// user_regs_struct field for each register numbered below GT_ST0, plus the
// three linux/segment-base registers.
struct GprSlot {
  unsigned regno;
  size_t offset;
};
constexpr GprSlot kGprSlots[] = {
    {GT_RAX, offsetof(user_regs_struct, rax)},
    {GT_RBX, offsetof(user_regs_struct, rbx)},
    {GT_RCX, offsetof(user_regs_struct, rcx)},
    {GT_RDX, offsetof(user_regs_struct, rdx)},
    {GT_RSI, offsetof(user_regs_struct, rsi)},
    {GT_RDI, offsetof(user_regs_struct, rdi)},
    {GT_RBP, offsetof(user_regs_struct, rbp)},
    {GT_RSP, offsetof(user_regs_struct, rsp)},
    {GT_R8, offsetof(user_regs_struct, r8)},
    {GT_R9, offsetof(user_regs_struct, r9)},
    {GT_R10, offsetof(user_regs_struct, r10)},
    {GT_R11, offsetof(user_regs_struct, r11)},
    {GT_R12, offsetof(user_regs_struct, r12)},
    {GT_R13, offsetof(user_regs_struct, r13)},
    {GT_R14, offsetof(user_regs_struct, r14)},
    {GT_R15, offsetof(user_regs_struct, r15)},
    {GT_RIP, offsetof(user_regs_struct, rip)},
    {GT_EFLAGS, offsetof(user_regs_struct, eflags)},
    {GT_CS, offsetof(user_regs_struct, cs)},
    {GT_SS, offsetof(user_regs_struct, ss)},
    {GT_DS, offsetof(user_regs_struct, ds)},
    {GT_ES, offsetof(user_regs_struct, es)},
    {GT_FS, offsetof(user_regs_struct, fs)},
    {GT_GS, offsetof(user_regs_struct, gs)},
    {GT_ORIG_RAX, offsetof(user_regs_struct, orig_rax)},
    {GT_FS_BASE, offsetof(user_regs_struct, fs_base)},
    {GT_GS_BASE, offsetof(user_regs_struct, gs_base)},
};

uint64_t gpr_field(const user_regs_struct& r, size_t offset) {
  uint64_t v;
  std::memcpy(&v, reinterpret_cast<const char*>(&r) + offset, 8);
  return v;
}

void set_gpr_field(user_regs_struct& r, size_t offset, uint64_t v) {
  std::memcpy(reinterpret_cast<char*>(&r) + offset, &v, 8);
}

// The FXSAVE image as GETFPREGS returns it (64-bit format; gdbserver splits
// the instruction/operand pointers into 32-bit offset + 16-bit selector).
struct Fxsave {
  uint16_t fctrl, fstat;
  uint8_t ftag_abridged, pad0;
  uint16_t fop;
  uint32_t fioff;
  uint16_t fiseg, pad1;
  uint32_t fooff;
  uint16_t foseg, pad2;
  uint32_t mxcsr, mxcsr_mask;
  uint8_t st[8][16];
  uint8_t xmm[16][16];
  uint8_t reserved[96];
};
static_assert(sizeof(Fxsave) == sizeof(user_fpregs_struct));
static_assert(offsetof(Fxsave, st) == GT_FX_ST && offsetof(Fxsave, xmm) == GT_FX_XMM &&
              offsetof(Fxsave, mxcsr) == GT_FX_MXCSR && offsetof(Fxsave, fooff) == GT_FX_FDP);

// gt_reg_offset sums the sizes of the registers before REGNO: computed once
// here, since every trace hit of the ptrace collector fills the whole block.
unsigned offset_of(unsigned regno) {
  static const auto table = [] {
    std::array<unsigned, GT_NUM_REGS_AVX> t{};
    for (unsigned r = 0; r < GT_NUM_REGS_AVX; r++)
      t[r] = gt_reg_offset(r);
    return t;
  }();
  return table[regno];
}

void put(RegisterBlock& b, unsigned regno, const void* src, size_t n) {
  std::memcpy(b.bytes.data() + offset_of(regno), src, n);
  b.valid.set(regno);
}

void supply_fxsave(RegisterBlock& b, const Fxsave& fx) {
  // GETFPREGS gives the whole image, components in their initial state included.
  gt_fxsave_to_block(reinterpret_cast<const unsigned char*>(&fx), GT_XFEATURE_FP | GT_XFEATURE_SSE,
                     b.bytes.data());
  for (unsigned r = GT_ST0; r <= GT_MXCSR; r++)
    b.valid.set(r);
}

void collect_fxsave(const RegisterBlock& b, Fxsave& fx) {
  auto valid = [&](unsigned r) { return b.valid.test(r); };
  for (unsigned i = 0; i < 8; i++)
    if (valid(GT_ST0 + i))
      std::memcpy(fx.st[i], b.bytes.data() + offset_of(GT_ST0 + i), 10);
  for (unsigned i = 0; i < 16; i++)
    if (valid(GT_XMM0 + i))
      std::memcpy(fx.xmm[i], b.bytes.data() + offset_of(GT_XMM0 + i), 16);
  if (valid(GT_FCTRL))
    fx.fctrl = b.get_u64(GT_FCTRL);
  if (valid(GT_FSTAT))
    fx.fstat = b.get_u64(GT_FSTAT);
  if (valid(GT_FTAG)) {
    uint32_t full = b.get_u64(GT_FTAG);
    uint8_t abridged = 0;
    for (int i = 7; i >= 0; i--)
      if (((full >> (2 * i)) & 3) != 3)
        abridged |= 1u << i;
    fx.ftag_abridged = abridged;
  }
  if (valid(GT_FISEG))
    fx.fiseg = b.get_u64(GT_FISEG);
  if (valid(GT_FIOFF))
    fx.fioff = b.get_u64(GT_FIOFF);
  if (valid(GT_FOSEG))
    fx.foseg = b.get_u64(GT_FOSEG);
  if (valid(GT_FOOFF))
    fx.fooff = b.get_u64(GT_FOOFF);
  if (valid(GT_FOP))
    fx.fop = (b.get_u64(GT_FOP) & 0x7ff) | (fx.fop & 0xf800);
  if (valid(GT_MXCSR))
    fx.mxcsr = b.get_u64(GT_MXCSR);
}

// XSAVE area: header (XSTATE_BV) at 512, YMM_Hi128 component at its standard
// non-compacted offset 576. The kernel's NT_X86_XSTATE regset uses this format.
constexpr size_t kXstateBvOffset = GT_XSAVE_XSTATE_BV;
constexpr size_t kYmmHiOffset = GT_XSAVE_YMM_HI;
constexpr uint64_t kXfeatureYmm = GT_XFEATURE_YMM;
constexpr size_t kXsaveBufferSize = 16384; // large enough for AMX-sized areas

struct XsaveBuffer {
  alignas(64) uint8_t bytes[kXsaveBufferSize];
};

// One buffer per thread, reused: allocating 16 KB (64-byte aligned) at every
// ptrace trace hit and freeing it left a hole in the heap at each new
// tracepoint site hit (other allocations landed after it), ~16 KB of stub RSS
// per site (issue 30: 1 000 sites, +16 MB).
XsaveBuffer& xsave_buffer() {
  static thread_local XsaveBuffer buffer;
  return buffer;
}

Result<size_t> get_xstate(pid_t tid, XsaveBuffer& buf) {
  iovec iov{buf.bytes, sizeof buf.bytes};
  if (ptrace(PTRACE_GETREGSET, tid, (void*)NT_X86_XSTATE, &iov) != 0)
    return ptrace_error("PTRACE_GETREGSET(NT_X86_XSTATE)", tid);
  return iov.iov_len;
}

} // namespace

bool cpu_has_avx() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d))
    return false;
  const unsigned kOsxsave = 1u << 27, kAvx = 1u << 28;
  if ((c & kOsxsave) == 0 || (c & kAvx) == 0)
    return false;
  unsigned lo, hi;
  asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & 6) == 6; // SSE and AVX state enabled by the OS
}

Result<RegisterBlock> read_registers(pid_t tid, bool avx, user_regs_struct* raw) {
  RegisterBlock block;
  user_regs_struct gpr{};
  if (ptrace(PTRACE_GETREGS, tid, nullptr, &gpr) != 0)
    return ptrace_error("PTRACE_GETREGS", tid);
  if (raw)
    *raw = gpr;
  for (const auto& slot : kGprSlots)
    block.set_u64(slot.regno, gpr_field(gpr, slot.offset));

  if (!avx) {
    Fxsave fx{};
    if (ptrace(PTRACE_GETFPREGS, tid, nullptr, &fx) != 0)
      return ptrace_error("PTRACE_GETFPREGS", tid);
    supply_fxsave(block, fx);
  } else {
    // The XSAVE area starts with the FXSAVE image (the regset fills the x87/SSE
    // part in full, with init values for components in their init state): one
    // ptrace call instead of two, per trace hit of the ptrace collector.
    XsaveBuffer* buf = &xsave_buffer();
    auto len = get_xstate(tid, *buf);
    if (!len)
      return len.error();
    if (*len < sizeof(Fxsave))
      return make_error(EIO, "PTRACE_GETREGSET(NT_X86_XSTATE): short XSAVE area");
    Fxsave fx{};
    std::memcpy(&fx, buf->bytes, sizeof fx);
    supply_fxsave(block, fx);
    uint64_t bv = 0;
    std::memcpy(&bv, buf->bytes + kXstateBvOffset, 8);
    bool have = (bv & kXfeatureYmm) && *len >= kYmmHiOffset + 256;
    for (unsigned i = 0; i < 16; i++) {
      uint8_t zero[16] = {};
      // A component missing from XSTATE_BV is in its initial (all-zero) state.
      put(block, GT_YMM0H + i, have ? buf->bytes + kYmmHiOffset + 16 * i : zero, 16);
    }
  }
  return block;
}

Result<void> write_registers(pid_t tid, const RegisterBlock& regs, bool avx) {
  bool any_gpr = false;
  for (const auto& slot : kGprSlots)
    any_gpr |= regs.valid.test(slot.regno);
  if (any_gpr) {
    user_regs_struct gpr{};
    if (ptrace(PTRACE_GETREGS, tid, nullptr, &gpr) != 0)
      return ptrace_error("PTRACE_GETREGS", tid);
    for (const auto& slot : kGprSlots) {
      if (!regs.valid.test(slot.regno))
        continue;
      uint64_t v = regs.get_u64(slot.regno);
      set_gpr_field(gpr, slot.offset, v);
    }
    if (ptrace(PTRACE_SETREGS, tid, nullptr, &gpr) != 0)
      return ptrace_error("PTRACE_SETREGS", tid);
  }

  bool any_fp = false;
  for (unsigned r = GT_ST0; r <= GT_MXCSR; r++)
    any_fp |= regs.valid.test(r);
  if (any_fp) {
    Fxsave fx{};
    if (ptrace(PTRACE_GETFPREGS, tid, nullptr, &fx) != 0)
      return ptrace_error("PTRACE_GETFPREGS", tid);
    collect_fxsave(regs, fx);
    if (ptrace(PTRACE_SETFPREGS, tid, nullptr, &fx) != 0)
      return ptrace_error("PTRACE_SETFPREGS", tid);
  }

  bool any_ymm = false;
  for (unsigned r = GT_YMM0H; r < GT_NUM_REGS_AVX; r++)
    any_ymm |= regs.valid.test(r);
  if (avx && any_ymm) {
    XsaveBuffer* buf = &xsave_buffer();
    auto len = get_xstate(tid, *buf);
    if (!len)
      return len.error();
    if (*len < kYmmHiOffset + 256)
      return make_error(EIO, "XSAVE area too small for ymm registers");
    uint64_t bv = 0;
    std::memcpy(&bv, buf->bytes + kXstateBvOffset, 8);
    if (!(bv & kXfeatureYmm)) // init state: all-zero upper halves
      std::memset(buf->bytes + kYmmHiOffset, 0, 256);
    for (unsigned i = 0; i < 16; i++)
      if (regs.valid.test(GT_YMM0H + i))
        std::memcpy(buf->bytes + kYmmHiOffset + 16 * i, regs.bytes.data() + offset_of(GT_YMM0H + i),
                    16);
    bv |= kXfeatureYmm;
    std::memcpy(buf->bytes + kXstateBvOffset, &bv, 8);
    iovec iov{buf->bytes, *len};
    if (ptrace(PTRACE_SETREGSET, tid, (void*)NT_X86_XSTATE, &iov) != 0)
      return ptrace_error("PTRACE_SETREGSET(NT_X86_XSTATE)", tid);
  }
  return ok();
}

Result<uint64_t> read_pc(pid_t tid) {
  errno = 0;
  long v = ptrace(PTRACE_PEEKUSER, tid, (void*)offsetof(user_regs_struct, rip), nullptr);
  if (errno != 0)
    return ptrace_error("PTRACE_PEEKUSER(rip)", tid);
  return static_cast<uint64_t>(v);
}

Result<void> write_pc(pid_t tid, uint64_t pc) {
  if (ptrace(PTRACE_POKEUSER, tid, (void*)offsetof(user_regs_struct, rip), (void*)pc) != 0)
    return ptrace_error("PTRACE_POKEUSER(rip)", tid);
  return ok();
}

} // namespace gdbtrace::x86
