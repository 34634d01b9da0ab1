// gdbserver-agent/src/shared/x86/emulate.c against the CPU: each instruction runs natively in a
// generated code page (all 16 registers and the flags loaded from a context,
// stored back afterwards) and in the emulator from the same state; registers,
// arithmetic flags, next ip and memory must agree. The module decodes probed
// instructions itself; Zydis is the oracle for that decoder: every form the
// module accepts must be exactly Zydis' recipe, over a table of encodings and
// over every REX/opcode/ModRM/SIB combination of the supported opcodes.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <sys/mman.h>
#include <vector>

#include "zydis_recipe.h"

extern "C" {
#include "x86/emulate.h"
}

namespace {

// gdb numbering <-> x86 encoding
constexpr int kHwOfGdb[16] = {0, 3, 1, 2, 6, 7, 5, 4, 8, 9, 10, 11, 12, 13, 14, 15};
constexpr uint64_t kArithFlags = 0x8d5;

struct Context {
  uint64_t in[16], in_flags;
  uint64_t out[16], out_flags;
  uint64_t save[16];
};

class Native {
public:
  Native() {
    page_ = static_cast<uint8_t*>(mmap(nullptr, kSize, PROT_READ | PROT_WRITE | PROT_EXEC,
                                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (page_ == MAP_FAILED)
      page_ = nullptr;
  }
  ~Native() {
    if (page_)
      munmap(page_, kSize);
  }
  bool ok() const { return page_ != nullptr; }
  Context* ctx() { return reinterpret_cast<Context*>(page_ + kCtx); }
  uint8_t* scratch() { return page_ + kScratch; }
  // Address the instruction under test will have.
  uint64_t insn_address() { return reinterpret_cast<uint64_t>(page_ + kInsn); }

  void run(const std::vector<uint8_t>& insn) {
    code_.clear();
    for (int hw : {3, 5, 12, 13, 14, 15, 4})
      mov_store(hw, field(&ctx()->save[hw]));
    rip_op({0xff}, 6, field(&ctx()->in_flags)); // push in_flags
    code_.push_back(0x9d);                      // popfq
    for (int g = 0; g < 16; g++)
      mov_load(kHwOfGdb[g], field(&ctx()->in[g]));
    pad_to(kInsn);
    code_.insert(code_.end(), insn.begin(), insn.end());
    for (int g = 0; g < 16; g++)
      mov_store(kHwOfGdb[g], field(&ctx()->out[g]));
    mov_load(4, field(&ctx()->save[4])); // back to our stack (mov leaves flags alone)
    code_.push_back(0x9c);               // pushfq
    rip_op({0x8f}, 0, field(&ctx()->out_flags));
    for (int hw : {3, 5, 12, 13, 14, 15})
      mov_load(hw, field(&ctx()->save[hw]));
    code_.push_back(0xc3);
    std::memcpy(page_, code_.data(), code_.size());
    __builtin___clear_cache(reinterpret_cast<char*>(page_),
                            reinterpret_cast<char*>(page_ + code_.size()));
    reinterpret_cast<void (*)()>(page_)();
  }

private:
  static constexpr size_t kSize = 8192, kInsn = 512, kCtx = 4096, kScratch = 6144;
  uint64_t field(const void* p) { return reinterpret_cast<uint64_t>(p); }
  uint64_t here() { return reinterpret_cast<uint64_t>(page_) + code_.size(); }
  void pad_to(size_t off) {
    while (code_.size() < off)
      code_.push_back(0x90);
  }
  void disp32_to(uint64_t target) {
    int32_t d = int32_t(int64_t(target) - int64_t(here() + 4));
    uint8_t b[4];
    std::memcpy(b, &d, 4);
    code_.insert(code_.end(), b, b + 4);
  }
  void rip_op(std::vector<uint8_t> opcode, int reg_field, uint64_t target) {
    code_.insert(code_.end(), opcode.begin(), opcode.end());
    code_.push_back(uint8_t(((reg_field & 7) << 3) | 5));
    disp32_to(target);
  }
  void mov_store(int hw, uint64_t target) {
    rip_op({uint8_t(0x48 | (hw >= 8 ? 4 : 0)), 0x89}, hw, target);
  }
  void mov_load(int hw, uint64_t target) {
    rip_op({uint8_t(0x48 | (hw >= 8 ? 4 : 0)), 0x8b}, hw, target);
  }

  uint8_t* page_ = nullptr;
  std::vector<uint8_t> code_;
};

unsigned long* reg_of(pt_regs& r, int g) {
  unsigned long* map[16] = {&r.ax, &r.bx, &r.cx,  &r.dx,  &r.si,  &r.di,  &r.bp,  &r.sp,
                            &r.r8, &r.r9, &r.r10, &r.r11, &r.r12, &r.r13, &r.r14, &r.r15};
  return map[g];
}

// An instruction with a rip-relative displacement aimed at the scratch area.
std::vector<uint8_t> with_rip_disp(Native& n, std::vector<uint8_t> bytes, size_t disp_at,
                                   int64_t into) {
  uint64_t next = n.insn_address() + bytes.size();
  int32_t d = int32_t(int64_t(reinterpret_cast<uint64_t>(n.scratch()) + into) - int64_t(next));
  std::memcpy(bytes.data() + disp_at, &d, 4);
  return bytes;
}

struct Case {
  const char* name;
  std::vector<uint8_t> bytes;
  int rip_disp_at = -1; // offset of a rip-relative disp32 to aim at scratch+64
  int base_reg = -1;    // gdb number of a memory base register: points at scratch+128
};

std::vector<Case> positive_cases() {
  return {
      {"mov %rsp,%rbp", {0x48, 0x89, 0xe5}},
      {"mov %ecx,%eax", {0x89, 0xc8}},
      {"mov %r8,%rdi", {0x4c, 0x89, 0xc7}},
      {"mov %r9,%rax (8b)", {0x49, 0x8b, 0xc1}},
      {"mov %edx,%r10d", {0x41, 0x89, 0xd2}},
      {"sub $0x10,%rsp", {0x48, 0x83, 0xec, 0x10}},
      {"add $0x8,%rsp", {0x48, 0x83, 0xc4, 0x08}},
      {"sub $0x100,%rsp", {0x48, 0x81, 0xec, 0x00, 0x01, 0x00, 0x00}},
      {"add $-1,%eax", {0x83, 0xc0, 0xff}},
      {"sub $1,%eax", {0x83, 0xe8, 0x01}},
      {"add $0x7f,%r15", {0x49, 0x83, 0xc7, 0x7f}},
      {"add $1,%rdi", {0x48, 0x83, 0xc7, 0x01}},
      {"sub $0x80000000,%rbx", {0x48, 0x81, 0xeb, 0x00, 0x00, 0x00, 0x80}},
      {"mov $42,%eax", {0xb8, 0x2a, 0x00, 0x00, 0x00}},
      {"mov $0x89abcdef,%r11d", {0x41, 0xbb, 0xef, 0xcd, 0xab, 0x89}},
      {"mov $-1,%rax (c7)", {0x48, 0xc7, 0xc0, 0xff, 0xff, 0xff, 0xff}},
      {"movabs $imm64,%r9", {0x49, 0xb9, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11}},
      {"lea disp(%rip),%rax", {0x48, 0x8d, 0x05, 0, 0, 0, 0}, 3},
      {"lea disp(%rip),%r11", {0x4c, 0x8d, 0x1d, 0, 0, 0, 0}, 3},
      {"mov disp(%rip),%rax", {0x48, 0x8b, 0x05, 0, 0, 0, 0}, 3},
      {"mov disp(%rip),%eax", {0x8b, 0x05, 0, 0, 0, 0}, 2},
      {"mov disp(%rip),%r15", {0x4c, 0x8b, 0x3d, 0, 0, 0, 0}, 3},
      {"mov %rsi,disp(%rip)", {0x48, 0x89, 0x35, 0, 0, 0, 0}, 3},
      {"mov %esi,disp(%rip)", {0x89, 0x35, 0, 0, 0, 0}, 2},
      {"mov %edi,-0x14(%rbp)", {0x89, 0x7d, 0xec}, -1, 6},
      {"mov %rdi,-0x18(%rbp)", {0x48, 0x89, 0x7d, 0xe8}, -1, 6},
      {"mov -0x14(%rbp),%eax", {0x8b, 0x45, 0xec}, -1, 6},
      {"mov 0x8(%rsp),%rax", {0x48, 0x8b, 0x44, 0x24, 0x08}, -1, 7},
      {"mov 0x10(%rsp),%r12", {0x4c, 0x8b, 0x64, 0x24, 0x10}, -1, 7},
      {"mov %rax,0x8(%r12)", {0x49, 0x89, 0x44, 0x24, 0x08}, -1, 12},
      {"mov %rax,(%rdi)", {0x48, 0x89, 0x07}, -1, 5},
      {"mov -0x40(%r13),%rcx", {0x49, 0x8b, 0x4d, 0xc0}, -1, 13},
      {"mov 0x20(%rax),%rax (disp32)", {0x48, 0x8b, 0x80, 0x20, 0x00, 0x00, 0x00}, -1, 0},
      {"endbr64", {0xf3, 0x0f, 0x1e, 0xfa}},
  };
}

TEST(KmodEmulate, MatchesCpu) {
  Native n;
  ASSERT_TRUE(n.ok()) << "no executable page";
  std::mt19937_64 rng(42);
  for (const Case& c : positive_cases()) {
    auto bytes =
        c.rip_disp_at >= 0 ? with_rip_disp(n, c.bytes, size_t(c.rip_disp_at), 64) : c.bytes;
    gdbtrace_emu recipe;
    ASSERT_EQ(gt_emu_decode(bytes.data(), uint32_t(bytes.size()), &recipe), 0) << c.name;
    ASSERT_EQ(recipe.insn_len, bytes.size()) << c.name;
    for (int round = 0; round < 64; round++) {
      Context& ctx = *n.ctx();
      for (auto& v : ctx.in)
        v = rng();
      // Edge values for the arithmetic flags now and then.
      if (round % 8 == 1)
        ctx.in[recipe.dst] = 0xffffffffull;
      if (round % 8 == 2)
        ctx.in[recipe.dst] = 0x8000000000000000ull;
      if (round % 8 == 3)
        ctx.in[recipe.dst] = 0x7fffffffull;
      ctx.in[7] = reinterpret_cast<uint64_t>(n.scratch()) + 128; // rsp: stores may target it
      if (c.base_reg >= 0)
        ctx.in[c.base_reg] = reinterpret_cast<uint64_t>(n.scratch()) + 128;
      ctx.in_flags = 0x202 | (rng() & kArithFlags);
      uint8_t mem_before[512];
      for (auto& b : mem_before)
        b = uint8_t(rng());
      std::memcpy(n.scratch(), mem_before, sizeof mem_before);

      n.run(bytes);
      uint8_t mem_native[512];
      std::memcpy(mem_native, n.scratch(), sizeof mem_native);

      std::memcpy(n.scratch(), mem_before, sizeof mem_before);
      pt_regs regs{};
      for (int g = 0; g < 16; g++)
        *reg_of(regs, g) = ctx.in[g];
      regs.flags = ctx.in_flags;
      regs.ip = n.insn_address();
      ASSERT_TRUE(gt_emu_apply(&recipe, &regs)) << c.name;
      EXPECT_EQ(regs.ip, n.insn_address() + bytes.size()) << c.name;
      for (int g = 0; g < 16; g++)
        EXPECT_EQ(*reg_of(regs, g), ctx.out[g])
            << c.name << " register " << g << " round " << round;
      EXPECT_EQ(regs.flags & kArithFlags, ctx.out_flags & kArithFlags)
          << c.name << " round " << round;
      EXPECT_EQ(std::memcmp(mem_native, n.scratch(), sizeof mem_native), 0) << c.name << " memory";
      if (::testing::Test::HasFailure())
        return;
    }
  }
}

TEST(KmodEmulate, ModuleDecoderAgreesWithZydisRecipe) {
  Native n;
  ASSERT_TRUE(n.ok());
  for (const Case& c : positive_cases()) {
    auto bytes =
        c.rip_disp_at >= 0 ? with_rip_disp(n, c.bytes, size_t(c.rip_disp_at), 64) : c.bytes;
    auto padded = bytes;
    padded.resize(16, 0xcc); // what follows the instruction must not matter
    auto zydis = gdbtrace::kmod::test::zydis_emu_recipe(padded);
    ASSERT_TRUE(zydis.has_value()) << c.name;
    gdbtrace_emu mine;
    ASSERT_EQ(gt_emu_decode(padded.data(), uint32_t(padded.size()), &mine), 0) << c.name;
    EXPECT_EQ(std::memcmp(&mine, &*zydis, sizeof mine), 0) << c.name;
  }
}

TEST(KmodEmulate, UnsupportedFormsDeclinedByBoth) {
  const std::vector<std::vector<uint8_t>> cases = {
      {0x55},                                        // push %rbp (the kernel emulates it itself)
      {0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0, 0, 0}, // mov %fs:0x28,%rax
      {0x66, 0x89, 0xc0},                            // 16-bit mov
      {0xe8, 0, 0, 0, 0},                            // call
      {0x48, 0x8b, 0x04, 0xc8},                      // indexed load
      {0xc3},                                        // ret
      {0x48, 0x01, 0xd0},                            // add %rdx,%rax
      {0x88, 0xc8},                                  // 8-bit mov
      {0xf0, 0x48, 0x83, 0x00, 0x01},                // lock addq $1,(%rax)
      {0x48, 0x83, 0x00, 0x01},                      // addq $1,(%rax): memory destination
      {0x48, 0x8d, 0x04, 0x24},                      // lea (%rsp),%rax: not rip-relative
      // REX.X turns SIB index 100 from "none" into r12: indexed, not (%rsp)/(%r12).
      {0x4a, 0x8b, 0x04, 0x24},                // mov (%rsp,%r12,1),%rax
      {0x4a, 0x89, 0x04, 0x24},                // mov %rax,(%rsp,%r12,1)
      {0x4b, 0x8b, 0x44, 0x24, 0x08},          // mov 0x8(%r12,%r12,1),%rax
      {0x42, 0x89, 0x44, 0x24, 0x10},          // mov %eax,0x10(%rsp,%r12,1)
      {0x4e, 0x8b, 0x84, 0x24, 0, 1, 0, 0},    // mov 0x100(%rsp,%r12,1),%r8
      {0x48, 0x8b, 0x04, 0x25, 0, 0x10, 0, 0}, // mov 0x1000,%rax: absolute through SIB
      {0x67, 0x48, 0x8b, 0x07},                // mov (%edi),%rax: 32-bit address
      {0x48, 0xc7, 0x00, 1, 0, 0, 0},          // movq $1,(%rax): memory destination
      {0x48, 0x83, 0xc8, 0x01},                // or $1,%rax
      {0x48, 0x8d, 0xc0},                      // lea with a register operand (invalid)
      {0x40},                                  // lone REX
  };
  for (const auto& b : cases) {
    auto padded = b;
    padded.resize(16, 0x90);
    gdbtrace_emu e;
    EXPECT_NE(gt_emu_decode(padded.data(), 16, &e), 0) << "byte0 " << int(b[0]);
    EXPECT_FALSE(gdbtrace::kmod::test::zydis_emu_recipe(padded).has_value())
        << "byte0 " << int(b[0]);
  }
  // Encodings the module declines although they mean a supported operation:
  // it only knows the canonical forms compilers emit (then the kernel
  // single-steps). Declining is always safe; Zydis does decode these.
  const std::vector<std::vector<uint8_t>> conservative = {
      {0x48, 0x8b, 0x44, 0x64, 0x08}, // mov 0x8(%rsp,%riz,2),%rax: scaled "no index"
      {0x48, 0x48, 0x89, 0xc0},       // two REX prefixes
  };
  for (const auto& b : conservative) {
    auto padded = b;
    padded.resize(16, 0x90);
    gdbtrace_emu e;
    EXPECT_NE(gt_emu_decode(padded.data(), 16, &e), 0) << "byte1 " << int(b[1]);
  }
}

// REX.X/.B/.R forms the module accepts, run against the CPU as well.
TEST(KmodEmulate, RexFormsMatchZydis) {
  struct Form {
    std::vector<uint8_t> bytes;
    bool emulated;
  };
  const std::vector<Form> forms = {
      {{0x41, 0x8b, 0x04, 0x24}, true},       // mov (%r12),%eax
      {{0x49, 0x89, 0x04, 0x24}, true},       // mov %rax,(%r12)
      {{0x4c, 0x8b, 0x24, 0x24}, true},       // mov (%rsp),%r12
      {{0x49, 0x8b, 0x05, 1, 0, 0, 0}, true}, // REX.B is ignored with rip-relative
      {{0x4a, 0x8b, 0x05, 1, 0, 0, 0}, true}, // so is REX.X (no SIB)
      {{0x4a, 0x8b, 0x04, 0x24}, false},      // index r12
      {{0x4b, 0x89, 0x04, 0x24}, false},      // base r12, index r12
  };
  for (const auto& f : forms) {
    auto padded = f.bytes;
    padded.resize(16, 0xcc);
    gdbtrace_emu mine;
    int rc = gt_emu_decode(padded.data(), 16, &mine);
    auto z = gdbtrace::kmod::test::zydis_emu_recipe(padded);
    EXPECT_EQ(rc == 0, f.emulated) << int(f.bytes[0]) << " " << int(f.bytes[2]);
    if (rc == 0) {
      ASSERT_TRUE(z.has_value());
      EXPECT_EQ(std::memcmp(&mine, &*z, sizeof mine), 0)
          << int(f.bytes[0]) << " " << int(f.bytes[2]);
    }
  }
}

// Every REX x opcode x ModRM x SIB combination of the opcodes the decoder
// handles: what the module accepts, Zydis must decode to the same recipe.
// (The module may decline forms Zydis would accept; never the reverse.)
TEST(KmodEmulate, ExhaustiveDecoderAgreesWithZydis) {
  const uint8_t opcodes[] = {0x89, 0x8b, 0x8d, 0x83, 0x81, 0xc7, 0xb8, 0xbb, 0xbc, 0xbf};
  const uint8_t sibs[] = {0x24, 0x25, 0x64, 0x20, 0xe4, 0x04};
  long accepted = 0, checked = 0;
  for (int rex = 0x3f; rex <= 0x4f; rex++) { // 0x3f: no REX prefix
    for (uint8_t op : opcodes) {
      for (int modrm = 0; modrm < 256; modrm++) {
        for (uint8_t sib : sibs) {
          uint8_t b[16];
          std::memset(b, 0x11, sizeof b); // displacement/immediate bytes
          size_t i = 0;
          if (rex >= 0x40)
            b[i++] = uint8_t(rex);
          b[i++] = op;
          b[i++] = uint8_t(modrm);
          b[i++] = sib;
          gdbtrace_emu mine;
          checked++;
          if (gt_emu_decode(b, 16, &mine) != 0)
            continue;
          accepted++;
          auto z = gdbtrace::kmod::test::zydis_emu_recipe({b, 16});
          ASSERT_TRUE(z.has_value()) << std::hex << "rex " << rex << " op " << int(op) << " modrm "
                                     << modrm << " sib " << int(sib);
          ASSERT_EQ(std::memcmp(&mine, &*z, sizeof mine), 0)
              << std::hex << "rex " << rex << " op " << int(op) << " modrm " << modrm << " sib "
              << int(sib) << ": module op " << mine.op << " zydis op " << z->op;
        }
      }
    }
  }
  EXPECT_GT(accepted, 1000) << "of " << checked;
}

// The decoder's ModRM length rule (gt_emu_modrm_operand_len: the ptrace
// collector's step-over measures multi-byte nops with it) against Zydis, for
// every ModRM and SIB byte of nopw/nopl Ev (0f 1f /0), and cut short.
TEST(KmodEmulate, ModrmOperandLengthAgreesWithZydis) {
  for (int modrm = 0; modrm < 256; modrm++) {
    if ((modrm >> 3) & 7)
      continue; // 0f 1f /1../7 are reserved-nop encodings, not this form
    for (int sib = 0; sib < 256; sib++) {
      uint8_t b[16];
      std::memset(b, 0x11, sizeof b);
      b[0] = 0x0f, b[1] = 0x1f, b[2] = uint8_t(modrm), b[3] = uint8_t(sib);
      auto z = gdbtrace::kmod::test::zydis_length({b, sizeof b});
      ASSERT_TRUE(z.has_value()) << std::hex << modrm << " " << sib;
      int n = gt_emu_modrm_operand_len(b + 3, sizeof b - 3, uint8_t(modrm));
      ASSERT_EQ(3 + n, int(*z)) << std::hex << "modrm " << modrm << " sib " << sib;
      for (uint32_t avail = 0; avail < uint32_t(n); avail++)
        ASSERT_EQ(gt_emu_modrm_operand_len(b + 3, avail, uint8_t(modrm)), -1) << avail;
    }
  }
}

TEST(KmodEmulate, TruncatedInstructionDeclined) {
  const uint8_t bytes[16] = {0x48, 0x8b, 0x05, 1, 2, 3, 4}; // mov disp32(%rip),%rax
  gdbtrace_emu e;
  EXPECT_EQ(gt_emu_decode(bytes, 7, &e), 0);
  for (uint32_t avail = 0; avail < 7; avail++)
    EXPECT_NE(gt_emu_decode(bytes, avail, &e), 0) << avail; // a file ending mid-instruction
}

} // namespace
