// What the jump pad compiles of a tracepoint, and what it refuses (and why).
#include <gtest/gtest.h>

#include "jumppad/jumppad_actions.h"

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
  ASSERT_TRUE(inc) << inc.error().message;
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
  Tracepoint mem = fast_tp();
  mem.actions.push_back(CollectMemory{6, -8, 8});
  EXPECT_NE(plan_actions(mem).error().message.find("memory collection"), std::string::npos);
  Tracepoint deref = fast_tp(); // collect *p: reg 5; ref64; ... trace
  deref.actions.push_back(CollectExpr{expr({0x26, 0, 5, 0x22, 8, 0x0c, 0x27})});
  EXPECT_FALSE(plan_actions(deref));
  Tracepoint step = fast_tp();
  step.step_count = 2;
  EXPECT_NE(plan_actions(step).error().message.find("while-stepping"), std::string::npos);
}

} // namespace
} // namespace gdbtrace::jumppad
