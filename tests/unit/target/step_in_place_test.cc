// execute_in_place against this very process (process_vm_readv/writev on
// itself): the recipes it accepts change registers and memory as the CPU
// would, and what it cannot execute, or whose memory access would fault, is
// declined with the registers untouched.
#include <gtest/gtest.h>

#include <cstring>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

#include "target/step_in_place.h"

namespace gdbtrace {
namespace {

user_regs_struct regs_at(uint64_t rip) {
  user_regs_struct r{};
  r.rip = rip;
  r.rax = 0x1111;
  r.rbx = 0x2222;
  r.rbp = 0x3333;
  r.r12 = 0x4444;
  r.eflags = 0x202;
  r.cs = 0x33; // 64-bit user code
  return r;
}

InPlace run(std::vector<uint8_t> insn, user_regs_struct& r) {
  return execute_in_place(insn, r, getpid());
}

TEST(StepInPlace, PushStoresBelowTheStackPointer) {
  alignas(16) uint64_t stack[4] = {};
  user_regs_struct r = regs_at(0x1000);
  r.rsp = uint64_t(&stack[2]);
  ASSERT_EQ(run({0x55}, r), InPlace::Done); // push %rbp
  EXPECT_EQ(r.rsp, uint64_t(&stack[1]));
  EXPECT_EQ(stack[1], 0x3333u);
  EXPECT_EQ(r.rip, 0x1001u);
  ASSERT_EQ(run({0x41, 0x54}, r), InPlace::Done); // push %r12
  EXPECT_EQ(stack[0], 0x4444u);
  EXPECT_EQ(r.rip, 0x1003u);
}

TEST(StepInPlace, NopFormsOnlyAdvanceRip) {
  for (auto insn :
       std::vector<std::vector<uint8_t>>{{0x90},
                                         {0x66, 0x90},
                                         {0x0f, 0x1f, 0x00},
                                         {0x0f, 0x1f, 0x44, 0x00, 0x00},
                                         {0x66, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00}}) {
    user_regs_struct r = regs_at(0x2000), before = r;
    ASSERT_EQ(run(insn, r), InPlace::Done) << insn.size();
    before.rip += insn.size();
    EXPECT_EQ(std::memcmp(&r, &before, sizeof r), 0) << insn.size();
  }
}

TEST(StepInPlace, ModuleRecipesReachTheTraceesMemory) {
  uint64_t cell = 0;
  user_regs_struct r = regs_at(0x3000);
  r.rdx = uint64_t(&cell);
  ASSERT_EQ(run({0x48, 0x89, 0x02}, r), InPlace::Done); // mov %rax,(%rdx)
  EXPECT_EQ(cell, 0x1111u);
  EXPECT_EQ(r.rip, 0x3003u);
  cell = 0xabcdef;
  ASSERT_EQ(run({0x48, 0x8b, 0x1a}, r), InPlace::Done); // mov (%rdx),%rbx
  EXPECT_EQ(r.rbx, 0xabcdefu);
}

TEST(StepInPlace, FaultingAccessAndUnknownInstructionsAreDeclined) {
  long page = sysconf(_SC_PAGESIZE);
  void* ro = mmap(nullptr, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(ro, MAP_FAILED);
  user_regs_struct r = regs_at(0x4000), before;
  r.rdx = uint64_t(ro);
  r.rsp = uint64_t(ro) + 8;
  before = r;
  EXPECT_EQ(run({0x48, 0x89, 0x02}, r), InPlace::Unsupported); // store to a read-only page
  EXPECT_EQ(run({0x55}, r), InPlace::Unsupported);             // push onto it
  EXPECT_EQ(run({0xe8, 0, 0, 0, 0}, r), InPlace::Unsupported); // call rel32
  EXPECT_EQ(run({0x41, 0x90}, r), InPlace::Unsupported);       // xchg %eax,%r8d, not a nop
  EXPECT_EQ(run({0x0f, 0x05}, r), InPlace::Unsupported);       // syscall
  r.cs = before.cs = 0x23; // a 32-bit thread: 0x90 is still nop, but nothing is decoded there
  EXPECT_EQ(run({0x90}, r), InPlace::Unsupported);
  EXPECT_EQ(std::memcmp(&r, &before, sizeof r), 0);
  munmap(ro, page);
}

} // namespace
} // namespace gdbtrace
