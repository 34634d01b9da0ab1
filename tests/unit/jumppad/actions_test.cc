// What the jump pad compiles of a tracepoint, and what it refuses (and why).
#include <gtest/gtest.h>

#include "jumppad/jumppad_actions.h"
#include "jumppad/jumppad_layout.h"

namespace gdbtrace::jumppad {
namespace {

AgentExpr expr(std::vector<uint8_t> code) {
  AgentExpr e;
  e.code = std::move(code);
  return e;
}

Tracepoint fast_tp() {
  Tracepoint tp;
  tp.number = 1;
  tp.address = 0x1000;
  tp.fast = true;
  return tp;
}

TEST(JumppadActions, TsvIncrementAsGdbSendsIt) {
  // teval $cnt = $cnt + 1 as gdb 13 compiles it: getv 2; const8 1; add; ext 64; setv 2; end
  auto inc = tsv_increment(expr({0x2c, 0, 2, 0x22, 1, 0x02, 0x16, 64, 0x2d, 0, 2, 0x27}));
  ASSERT_TRUE(inc);
  EXPECT_EQ(inc->number, 2u);
  EXPECT_EQ(inc->k, 1);
  auto big = tsv_increment(expr({0x2c, 0, 3, 0x24, 0, 1, 0, 0, 0x02, 0x2d, 0, 3, 0x27}));
  ASSERT_TRUE(big);
  EXPECT_EQ(big->k, 0x10000);
  // setv of another variable, or a subtraction: not an increment of one TSV.
  EXPECT_FALSE(tsv_increment(expr({0x2c, 0, 2, 0x22, 1, 0x02, 0x2d, 0, 3, 0x27})));
  EXPECT_FALSE(tsv_increment(expr({0x2c, 0, 2, 0x22, 1, 0x03, 0x2d, 0, 2, 0x27})));
}

TEST(JumppadActions, RegistersAndIncrementsAreServed) {
  Tracepoint tp = fast_tp();
  tp.actions.push_back(CollectRegisters{{0xff}});
  tp.actions.push_back(CollectExpr{expr({0x26, 0, 5, 0x27})}); // reg 5 (gdb's `collect x`)
  tp.actions.push_back(CollectExpr{expr({0x2c, 0, 2, 0x22, 1, 0x02, 0x2d, 0, 2, 0x29, 0x27})});
  auto a = plan_actions(tp);
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_TRUE(a->registers);
  ASSERT_EQ(a->tsv_adds.size(), 1u);
  EXPECT_EQ(a->tsv_adds[0].number, 2u);
}

// Which tracepoints reach the pad is the engine's policy (kFastOnly: `ftrace`, or
// a `trace` where a pad already is); a plain one is planned as an ftrace is.
TEST(JumppadActions, APlainTracepointIsPlannedAlike) {
  Tracepoint plain = fast_tp();
  plain.fast = false;
  EXPECT_TRUE(plan_actions(plain));
}

TEST(JumppadActions, RefusesWithTheReason) {
  Tracepoint cond = fast_tp(); // a condition that reads memory: *p == 0
  cond.has_condition = true;
  cond.condition = expr({0x26, 0, 5, 0x19, 0x22, 0, 0x13, 0x27});
  cond.condition.info.uses_mem = 1;
  EXPECT_NE(plan_actions(cond).error().message.find("reads memory"), std::string::npos);
  Tracepoint deref = fast_tp(); // collect *p: reg 5; ref64; ... trace
  deref.actions.push_back(CollectExpr{expr({0x26, 0, 5, 0x22, 8, 0x0c, 0x27})});
  EXPECT_NE(plan_actions(deref).error().message.find("memory reads in expressions"),
            std::string::npos);
  Tracepoint step = fast_tp();
  step.step_count = 2;
  EXPECT_NE(plan_actions(step).error().message.find("while-stepping"), std::string::npos);
}

TEST(JumppadActions, MemoryRangesThatFitTheRecordAreServed) {
  // `collect some_global` (absolute, as gdb sends it: basereg -1) and a local at -8(%rbp).
  Tracepoint tp = fast_tp();
  tp.actions.push_back(CollectMemory{-1, 0x601040, 8});
  tp.actions.push_back(CollectMemory{6, -8, 4});
  auto a = plan_actions(tp);
  ASSERT_TRUE(a) << a.error().message;
  ASSERT_EQ(a->memory.size(), 2u);
  EXPECT_EQ(a->memory[0].basereg, -1);
  EXPECT_EQ(a->memory[0].address, 0x601040u);
  EXPECT_EQ(a->memory[0].length, 8u);
  EXPECT_EQ(a->memory[1].basereg, 6);
  EXPECT_EQ(a->memory[1].address, uint64_t(-8));
}

TEST(JumppadActions, ConstantAddressTracesAreRanges) {
  // `collect s.field` of a global, as gdb 13 sends it: const16 0x7000; const8 8; trace; end.
  Tracepoint tp = fast_tp();
  tp.actions.push_back(CollectExpr{expr({0x23, 0x70, 0x00, 0x22, 8, 0x0c, 0x27})});
  tp.actions.push_back(CollectExpr{expr({0x25, 0, 0, 0x55, 0x55, 0, 0, 0x10, 0, 0x0d, 4, 0x27})});
  auto a = plan_actions(tp);
  ASSERT_TRUE(a) << a.error().message;
  ASSERT_EQ(a->memory.size(), 2u);
  EXPECT_EQ(a->memory[0].address, 0x7000u);
  EXPECT_EQ(a->memory[0].length, 8u);
  EXPECT_EQ(a->memory[1].address, 0x555500001000u); // trace_quick 4
  EXPECT_EQ(a->memory[1].length, 4u);
  Tracepoint big = fast_tp(); // a 4 KB struct: does not fit the record
  big.actions.push_back(CollectExpr{expr({0x23, 0x70, 0x00, 0x23, 0x10, 0x00, 0x0c, 0x27})});
  EXPECT_NE(plan_actions(big).error().message.find("record holds"), std::string::npos);
}

TEST(JumppadActions, MemoryRangesRefusedWithTheReason) {
  auto reason = [](std::vector<CollectMemory> ranges) {
    Tracepoint tp = fast_tp();
    for (const CollectMemory& m : ranges)
      tp.actions.push_back(m);
    auto a = plan_actions(tp);
    return a ? std::string("served") : a.error().message;
  };
  // What does not fit beside the registers (`collect arr` of a large array) falls back.
  EXPECT_NE(reason({{-1, 0x1000, uint32_t(kRecordMemBytes) + 1}}).find("record holds"),
            std::string::npos);
  EXPECT_NE(reason({{-1, 0x1000, 64}, {-1, 0x2000, 65}}).find("record holds"), std::string::npos);
  EXPECT_EQ(reason({{-1, 0x1000, uint32_t(kRecordMemBytes)}}), "served");
  EXPECT_NE(reason({{40, 0, 8}}).find("register 40"), std::string::npos);
  CollectMemory stack{7, 0, 64};
  stack.stack = true;
  EXPECT_NE(reason({stack}).find("stack snapshot"), std::string::npos);
}

} // namespace
} // namespace gdbtrace::jumppad
