// Which sites the jump pad takes, and how the displaced instruction moves.
#include <gtest/gtest.h>

#include <cstring>

#include "jumppad/jumppad_area.h"
#include "jumppad/jumppad_site.h"

namespace gdbtrace::jumppad {
namespace {

TEST(JumppadSite, RipRelativeLoadIsRelocatable) {
  const uint8_t insn[] = {0x48, 0x8b, 0x05, 0x10, 0x00, 0x00, 0x00, 0xc3}; // mov 0x10(%rip),%rax
  auto plan = plan_site(insn);
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(plan->insn.size(), 7u);
  EXPECT_EQ(plan->disp_at, 3);
  // Moved 0x1000 bytes up, the operand still names site + 7 + 0x10.
  auto moved = relocate(*plan, 0x400000, 0x401000);
  ASSERT_TRUE(moved);
  int32_t disp;
  std::memcpy(&disp, moved->data() + 3, 4);
  EXPECT_EQ(0x401000 + 7 + int64_t(disp), 0x400000 + 7 + 0x10);
  EXPECT_EQ((*moved)[0], 0x48);
  EXPECT_EQ((*moved)[2], 0x05);
}

TEST(JumppadSite, LeaAndStoreRipRelative) {
  const uint8_t lea[] = {0x48, 0x8d, 0x3d, 0x00, 0x01, 0x00, 0x00}; // lea 0x100(%rip),%rdi
  auto p = plan_site(lea);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->disp_at, 3);
  const uint8_t store[] = {0x89, 0x05, 0xfc, 0xff, 0xff, 0xff}; // mov %eax,-4(%rip)
  auto s = plan_site(store);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->disp_at, 2);
}

TEST(JumppadSite, NonRipInstructionsMoveAsTheyAre) {
  const uint8_t movimm[] = {0xb8, 0x2a, 0x00, 0x00, 0x00}; // mov $42,%eax
  auto p = plan_site(movimm);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->disp_at, -1);
  auto moved = relocate(*p, 0x1000, 0x7fff0000);
  ASSERT_TRUE(moved);
  EXPECT_EQ(*moved, std::vector<uint8_t>(movimm, movimm + 5));
}

TEST(JumppadSite, RefusesShortAndUnknownInstructions) {
  const uint8_t push_rbp[] = {0x55, 0x48, 0x89, 0xe5};
  auto p = plan_site(push_rbp);
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("not one the jump pad relocates"), std::string::npos);
  const uint8_t endbr[] = {0xf3, 0x0f, 0x1e, 0xfa, 0x55};
  auto e = plan_site(endbr);
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message.find("4 bytes; the jump needs 5"), std::string::npos);
  const uint8_t jmp8[] = {0xeb, 0x10, 0x90, 0x90, 0x90}; // jmp rel8: 2 bytes
  EXPECT_FALSE(plan_site(jmp8));
  const uint8_t notrack[] = {0x3e, 0xff, 0x25, 0, 0, 0, 0}; // notrack jmp *(%rip): a prefix
  EXPECT_FALSE(plan_site(notrack));
  const uint8_t fs_load[] = {0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0, 0, 0}; // mov %fs:0x28,%rax
  EXPECT_FALSE(plan_site(fs_load));
}

// A branch at the site becomes a sequence in the pad that goes where the branch
// goes, from anywhere: targets are absolute (jmp *0(%rip); .quad T).
uint64_t quad_at(const std::vector<uint8_t>& v, size_t at) {
  uint64_t q;
  std::memcpy(&q, v.data() + at, 8);
  return q;
}

TEST(JumppadSite, CallPushesTheSitesReturnAddressThenJumps) {
  const uint8_t call[] = {0xe8, 0x10, 0x00, 0x00, 0x00}; // call site+5+0x10
  auto plan = plan_site(call);
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_TRUE(plan->pushes_return());
  auto seq = relocate(*plan, 0x400000, 0x7f0000000000); // terabytes away: still reaches
  ASSERT_TRUE(seq);
  ASSERT_EQ(seq->size(), 20u + 14u);
  uint32_t lo, hi;
  std::memcpy(&lo, seq->data() + 8, 4);
  std::memcpy(&hi, seq->data() + 16, 4);
  EXPECT_EQ(uint64_t(hi) << 32 | lo, 0x400005u); // the return address: after the site's call
  EXPECT_EQ((*seq)[20], 0xff);
  EXPECT_EQ((*seq)[21], 0x25);
  EXPECT_EQ(quad_at(*seq, 26), 0x400015u);
}

TEST(JumppadSite, JccTakesBothWays) {
  const uint8_t jne[] = {0x0f, 0x85, 0xfa, 0xff, 0xff, 0xff}; // jne site+6-6 (a loop back)
  auto plan = plan_site(jne);
  ASSERT_TRUE(plan);
  EXPECT_FALSE(plan->pushes_return());
  auto seq = relocate(*plan, 0x400000, 0x500000);
  ASSERT_TRUE(seq);
  ASSERT_EQ(seq->size(), 2u + 14u + 14u);
  EXPECT_EQ((*seq)[0], 0x75); // jne rel8 over the fall-through jump
  EXPECT_EQ((*seq)[1], 14);
  EXPECT_EQ(quad_at(*seq, 8), 0x400006u);  // not taken: after the site
  EXPECT_EQ(quad_at(*seq, 22), 0x400000u); // taken
}

TEST(JumppadSite, IndirectCallReadsTheSamePointer) {
  const uint8_t call[] = {0xff, 0x15, 0x00, 0x10, 0x00, 0x00}; // call *0x1000(%rip)
  auto plan = plan_site(call);
  ASSERT_TRUE(plan);
  auto seq = relocate(*plan, 0x400000, 0x410000);
  ASSERT_TRUE(seq);
  ASSERT_EQ(seq->size(), 20u + 6u);
  int32_t disp;
  std::memcpy(&disp, seq->data() + 22, 4);
  EXPECT_EQ(0x410000 + 26 + int64_t(disp), 0x400006 + 0x1000);      // the GOT entry itself
  EXPECT_FALSE(relocate(*plan, 0x400000, 0x400000 + (3ull << 30))); // its pointer out of reach
}

TEST(JumppadSite, RelocationOutOfReachIsAnError) {
  const uint8_t insn[] = {0x48, 0x8b, 0x05, 0x00, 0x00, 0x00, 0x00};
  auto plan = plan_site(insn);
  ASSERT_TRUE(plan);
  EXPECT_FALSE(relocate(*plan, 0x10000000, 0x10000000 + (3ull << 30)));
  EXPECT_FALSE(site_jump(0x10000000, 0x10000000 + (3ull << 30)));
  auto j = site_jump(0x1000, 0x2000);
  ASSERT_TRUE(j);
  EXPECT_EQ((*j)[0], 0xe9);
  int32_t rel;
  std::memcpy(&rel, j->data() + 1, 4);
  EXPECT_EQ(rel, 0x2000 - 0x1005);
}

procfs::MapsEntry mapping(uint64_t start, uint64_t end) {
  procfs::MapsEntry m;
  m.start = start;
  m.end = end;
  return m;
}

TEST(JumppadArea, ChoosesTheFreeGapNearestTheSite) {
  // A PIE's text at 0x555555554000, the heap after it, libraries high up.
  std::vector<procfs::MapsEntry> maps = {mapping(0x555555554000, 0x555555559000),
                                         mapping(0x555555559000, 0x55555557a000),
                                         mapping(0x7ffff7d80000, 0x7ffff7fff000)};
  auto at = choose_address(maps, 0x555555555100, 0x800000);
  ASSERT_TRUE(at);
  EXPECT_EQ(*at, 0x555555554000 - 0x800000); // just below the executable
  // A site in a library: the gap just below it.
  auto lib = choose_address(maps, 0x7ffff7e00000, 0x800000);
  ASSERT_TRUE(lib);
  EXPECT_EQ(*lib, 0x7ffff7d80000 - 0x800000);
}

TEST(JumppadArea, NoGapWithinReachIsAnError) {
  std::vector<procfs::MapsEntry> maps = {mapping(0x10000, 0x7ffffffff000)};
  auto at = choose_address(maps, 0x500000000, 0x800000);
  ASSERT_FALSE(at);
  EXPECT_NE(at.error().message.find("within 2 GB"), std::string::npos);
}

} // namespace
} // namespace gdbtrace::jumppad
