// The BPF emulation of probed instructions (bpf/bpf_emulate.h) run by this
// kernel and compared with the module's C emulator (gt_emu_apply, itself
// compared with the CPU in tests/unit/kmod).
//
// A uprobe program may write its pt_regs only from Linux 6.19, so the emitted
// code is wrapped in a BPF_PROG_TYPE_SYSCALL program instead: its context is a
// buffer this test passes in (a struct pt_regs) and gets back after the run,
// and it has the same helpers (probe_read_user reads this process's memory).
#include <gtest/gtest.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bpf/bpf_emulate.h"
#include "bpf/bpf_support.h"
#include "bpf_live_fixture.h"

namespace gdbtrace::test {
namespace {

using namespace gdbtrace::bpf;

constexpr uint64_t kSite = 0x401000;

class BpfEmulate : public BpfLiveFixture {
protected:
  void SetUp() override {
    BpfLiveFixture::SetUp(); // the collector: fails under CI when eBPF is missing
    if (IsSkipped() || HasFatalFailure())
      return;
    auto ks = probe_kernel_support();
    std::string why = ks ? "" : ks.error().message;
    if (ks && !ks->task_dr7_offset)
      why = "no thread.ptrace_dr7 in vmlinux BTF";
    if (!why.empty())
      GDBTRACE_SKIP("no-ebpf") << why;
    dr7_offset_ = *ks->task_dr7_offset;
  }

  // The program: r6 = ctx; emulation; r0 = 1 (emulated) or 0 (declined).
  int load(const gdbtrace_emu& recipe, uint64_t address = kSite) {
    Assembler a;
    int out = a.new_label();
    a.emit(mov64_reg(R6, R1));
    EmulationSite site;
    site.address = address;
    site.recipe = recipe;
    site.task_dr7_offset = dr7_offset_;
    emit_emulation(a, site, R6, -8, out);
    a.emit(mov64_imm(R0, 1));
    a.emit(exit_insn());
    a.bind(out);
    a.emit(mov64_imm(R0, 0));
    a.emit(exit_insn());
    std::vector<bpf_insn> insns;
    EXPECT_TRUE(a.finish(insns));
    std::vector<char> log(1 << 16);
    LIBBPF_OPTS(bpf_prog_load_opts, opts, .prog_flags = BPF_F_SLEEPABLE, .log_level = 1,
                .log_size = uint32_t(log.size()), .log_buf = log.data());
    int fd = bpf_prog_load(BPF_PROG_TYPE_SYSCALL, "gt_emu_test", "GPL", insns.data(), insns.size(),
                           &opts);
    EXPECT_GE(fd, 0) << "verifier: " << log.data();
    return fd;
  }

  // Runs program FD on REGS; returns its r0.
  static int run(int fd, pt_regs& regs) {
    LIBBPF_OPTS(bpf_test_run_opts, opts, .ctx_in = &regs, .ctx_size_in = sizeof(regs));
    EXPECT_EQ(bpf_prog_test_run_opts(fd, &opts), 0) << strerror(errno);
    return int(opts.retval);
  }

  static gdbtrace_emu decode(const std::vector<uint8_t>& bytes) {
    gdbtrace_emu e{};
    EXPECT_EQ(gt_emu_decode(bytes.data(), uint32_t(bytes.size()), &e), 0);
    return e;
  }

  pt_regs random_regs(std::mt19937_64& rng) {
    static const uint64_t edges[] = {
        0,          1,     0x7fffffff, 0x80000000, 0xffffffff, 0x100000000, 0x7fffffffffffffff,
        1ull << 63, ~0ull, 0xf,        0x10,       0xff};
    pt_regs r{};
    auto* words = reinterpret_cast<uint64_t*>(&r);
    for (size_t i = 0; i < sizeof(r) / 8; i++)
      words[i] = (rng() % 3 == 0) ? edges[rng() % std::size(edges)] : rng();
    r.ip = kSite;
    r.cs = 0x33;
    r.flags = (rng() & 0xcd5) | 0x202; // arithmetic flags, IF, DF; never TF
    return r;
  }

  uint32_t dr7_offset_ = 0;
};

// Every recipe the program carries out, in both widths where it has them.
const std::vector<std::vector<uint8_t>> kEmulated = {
    {0xf3, 0x0f, 0x1e, 0xfa},                   // endbr64
    {0x48, 0x89, 0xe5},                         // mov %rsp,%rbp
    {0x89, 0xc8},                               // mov %ecx,%eax
    {0x4c, 0x89, 0xc7},                         // mov %r8,%rdi
    {0x44, 0x8b, 0xc1},                         // mov %ecx,%r8d
    {0x48, 0x83, 0xec, 0x18},                   // sub $0x18,%rsp
    {0x48, 0x83, 0xc4, 0x08},                   // add $0x8,%rsp
    {0x83, 0xc7, 0x01},                         // add $0x1,%edi
    {0x48, 0x83, 0xc0, 0xff},                   // add $-1,%rax
    {0x41, 0x83, 0xe8, 0x05},                   // sub $0x5,%r8d
    {0x48, 0x81, 0xec, 0x00, 0x10, 0x00, 0x00}, // sub $0x1000,%rsp
    {0x81, 0xc1, 0x00, 0x00, 0x00, 0x80},       // add $0x80000000,%ecx
    {0xb8, 0x2a, 0x00, 0x00, 0x00},             // mov $42,%eax
    {0x48, 0xb8, 1, 2, 3, 4, 5, 6, 7, 0x88},    // movabs $0x8807060504030201,%rax
    {0x48, 0xc7, 0xc0, 0xff, 0xff, 0xff, 0xff}, // mov $-1,%rax
    {0xc7, 0xc1, 0x78, 0x56, 0x34, 0x92},       // mov $0x92345678,%ecx
    {0x48, 0x8d, 0x05, 0x10, 0x00, 0x00, 0x00}, // lea 0x10(%rip),%rax
    {0x8d, 0x0d, 0xf0, 0xff, 0xff, 0xff},       // lea -0x10(%rip),%ecx
};

TEST_F(BpfEmulate, MatchesTheModuleEmulatorOnRegisterRecipes) {
  std::mt19937_64 rng(20261124);
  for (const auto& bytes : kEmulated) {
    gdbtrace_emu e = decode(bytes);
    ASSERT_TRUE(bpf_can_emulate(e)) << "op " << e.op;
    int fd = load(e);
    ASSERT_GE(fd, 0);
    for (int i = 0; i < 200; i++) {
      pt_regs in = random_regs(rng), bpf = in, c = in;
      ASSERT_EQ(run(fd, bpf), 1) << "op " << e.op << " declined";
      ASSERT_TRUE(gt_emu_apply(&e, &c));
      ASSERT_EQ(memcmp(&bpf, &c, sizeof(c)), 0)
          << "op " << e.op << " len " << int(e.insn_len) << " case " << i << ": flags bpf 0x"
          << std::hex << bpf.flags << " c 0x" << c.flags << " ip 0x" << bpf.ip << "/0x" << c.ip;
    }
    close(fd);
  }
}

TEST_F(BpfEmulate, LoadsReadThisProcessMemory) {
  std::mt19937_64 rng(7);
  alignas(16) static uint64_t memory[64];
  for (auto& w : memory)
    w = rng();
  uint64_t mid = uint64_t(uintptr_t(&memory[32]));
  struct Case {
    std::vector<uint8_t> bytes;
    uint64_t pt_regs::*base; // null: rip-relative
  };
  const std::vector<Case> cases = {
      {{0x48, 0x8b, 0x47, 0x08}, &pt_regs::di},                   // mov 0x8(%rdi),%rax
      {{0x8b, 0x07}, &pt_regs::di},                               // mov (%rdi),%eax
      {{0x48, 0x8b, 0x44, 0x24, 0x10}, &pt_regs::sp},             // mov 0x10(%rsp),%rax
      {{0x4c, 0x8b, 0x65, 0xf8}, &pt_regs::bp},                   // mov -0x8(%rbp),%r12
      {{0x48, 0x8b, 0x87, 0x80, 0xff, 0xff, 0xff}, &pt_regs::di}, // mov -0x80(%rdi),%rax
      {{0x48, 0x8b, 0x05, 0x00, 0x01, 0x00, 0x00}, nullptr},      // mov 0x100(%rip),%rax
      {{0x8b, 0x0d, 0x40, 0x00, 0x00, 0x00}, nullptr},            // mov 0x40(%rip),%ecx
  };
  for (const auto& k : cases) {
    gdbtrace_emu e = decode(k.bytes);
    ASSERT_TRUE(bpf_can_emulate(e));
    // A rip-relative operand is next_ip + disp: put the site where that lands on MID.
    uint64_t site = k.base ? kSite : mid - uint64_t(e.imm) - e.insn_len;
    int fd = load(e, site);
    ASSERT_GE(fd, 0);
    for (int i = 0; i < 50; i++) {
      pt_regs in = random_regs(rng);
      in.ip = site;
      if (k.base)
        in.*k.base = mid;
      pt_regs bpf = in, c = in;
      ASSERT_EQ(run(fd, bpf), 1) << "load op " << e.op << " declined";
      ASSERT_TRUE(gt_emu_apply(&e, &c));
      ASSERT_EQ(memcmp(&bpf, &c, sizeof(c)), 0) << "load op " << e.op << " case " << i;
    }
    close(fd);
  }
}

// Where emulating would be wrong the program leaves the registers alone (the
// kernel then single-steps the instruction as without emulation).
TEST_F(BpfEmulate, DeclinesWhenEmulatingWouldBeWrong) {
  std::mt19937_64 rng(3);
  gdbtrace_emu add = decode({0x48, 0x83, 0xec, 0x18});
  gdbtrace_emu load_di = decode({0x48, 0x8b, 0x47, 0x08});
  int fd_add = load(add), fd_load = load(load_di);
  ASSERT_GE(fd_add, 0);
  ASSERT_GE(fd_load, 0);
  auto declines = [&](int fd, pt_regs in, const char* why) {
    pt_regs out = in;
    EXPECT_EQ(run(fd, out), 0) << why;
    EXPECT_EQ(memcmp(&in, &out, sizeof(in)), 0) << why << ": registers changed";
  };
  pt_regs r = random_regs(rng);
  r.flags |= 0x100;
  declines(fd_add, r, "trap flag set (a debugger single-steps the thread)");
  r = random_regs(rng);
  r.ip = kSite + 1;
  declines(fd_add, r, "ip already moved (another consumer emulated)");
  r = random_regs(rng);
  r.cs = 0x23;
  declines(fd_add, r, "32-bit code");
  r = random_regs(rng);
  r.di = 0x10; // nothing mapped there
  declines(fd_load, r, "unreadable load operand");
  close(fd_add);
  close(fd_load);
}

TEST(BpfEmulateRecipes, StoresAreLeftToTheKernel) {
  for (const std::vector<uint8_t>& bytes :
       {std::vector<uint8_t>{0x48, 0x89, 0x07}, std::vector<uint8_t>{0x89, 0x05, 0, 0, 0, 0}}) {
    gdbtrace_emu e{};
    ASSERT_EQ(gt_emu_decode(bytes.data(), uint32_t(bytes.size()), &e), 0);
    EXPECT_FALSE(bpf_can_emulate(e)) << "op " << e.op;
  }
  gdbtrace_emu none{};
  EXPECT_FALSE(bpf_can_emulate(none));
}

} // namespace
} // namespace gdbtrace::test
