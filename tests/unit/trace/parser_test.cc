#include <gtest/gtest.h>

#include "abi/amd64_regs.h"
#include "trace/tracepoint_parser.h"

using namespace gdbtrace;

namespace {

VerifyEnv env(uint32_t regs = GT_NUM_REGS_AVX) {
  VerifyEnv e;
  e.num_regs = regs;
  e.tsv_exists = [](uint32_t n) { return n == 1 || n == 2; };
  return e;
}

} // namespace

TEST(QtdpHeader, PlainTracepoint) {
  auto h = parse_qtdp_header("1:0000555555555139:E:0:0", env());
  ASSERT_TRUE(h) << h.error().message;
  EXPECT_EQ(h->tp.number, 1u);
  EXPECT_EQ(h->tp.address, 0x555555555139u);
  EXPECT_TRUE(h->tp.enabled);
  EXPECT_EQ(h->tp.step_count, 0u);
  EXPECT_FALSE(h->tp.fast);
  EXPECT_FALSE(h->tp.has_condition);
  EXPECT_FALSE(h->more);
}

TEST(QtdpHeader, AllOptionalFields) {
  // ftrace, disabled, while-stepping 5, pass 0x10, condition "$rax == 3", actions follow.
  // reg 0; const8 3; equal; end
  auto h = parse_qtdp_header("2:401136:D:5:10:F5:X7,26000022031327-", env());
  ASSERT_TRUE(h) << h.error().message;
  EXPECT_FALSE(h->tp.enabled);
  EXPECT_EQ(h->tp.step_count, 5u);
  EXPECT_EQ(h->tp.pass_count, 16u);
  EXPECT_TRUE(h->tp.fast);
  EXPECT_EQ(h->tp.fast_min_len, 5u);
  ASSERT_TRUE(h->tp.has_condition);
  EXPECT_EQ(h->tp.condition.code.size(), 7u);
  EXPECT_TRUE(h->more);
}

TEST(QtdpHeader, BadConditionBytecodeNamesTheProblem) {
  // 0xff is not an opcode.
  auto h = parse_qtdp_header("3:401136:E:0:0:X2,ff27", env());
  ASSERT_FALSE(h);
  EXPECT_NE(h.error().message.find("tracepoint 3 condition"), std::string::npos)
      << h.error().message;
  EXPECT_NE(h.error().message.find("byte 0"), std::string::npos) << h.error().message;
}

TEST(QtdpHeader, ConditionMayNotTrace) {
  // const8 0; const8 4; trace; const8 1; end
  auto h = parse_qtdp_header("3:401136:E:0:0:X8,220022040c220127", env());
  ASSERT_FALSE(h);
}

TEST(QtdpHeader, RegisterNumberLimited) {
  // reg 76 is beyond the AVX register set; reg 60 beyond the non-AVX one.
  EXPECT_FALSE(parse_qtdp_header("4:401136:E:0:0:X4,26004c27", env()));
  EXPECT_TRUE(parse_qtdp_header("4:401136:E:0:0:X4,26003c27", env()));
  EXPECT_FALSE(parse_qtdp_header("4:401136:E:0:0:X4,26003c27", env(GT_NUM_REGS_NOAVX)));
}

TEST(QtdpHeader, UndefinedTsvRejected) {
  // getv 7; end  (only 1 and 2 exist)
  EXPECT_FALSE(parse_qtdp_header("5:401136:E:0:0:X4,2c000727", env()));
  EXPECT_TRUE(parse_qtdp_header("5:401136:E:0:0:X4,2c000227", env()));
}

TEST(QtdpHeader, Malformed) {
  EXPECT_FALSE(parse_qtdp_header("", env()));
  EXPECT_FALSE(parse_qtdp_header("1:401136", env()));
  EXPECT_FALSE(parse_qtdp_header("1:401136:Q:0:0", env()));
  EXPECT_FALSE(parse_qtdp_header("1:401136:E:0:0:X9,27", env())); // short
  EXPECT_FALSE(parse_qtdp_header("1:401136:E:0:0:S", env()));     // static tracepoint
  EXPECT_FALSE(parse_qtdp_header("0:401136:E:0:0", env()));       // number 0
  EXPECT_FALSE(parse_qtdp_header("1:401136:E:0:0garbage", env()));
}

TEST(QtdpActions, RegistersMemoryExpression) {
  Tracepoint tp;
  tp.number = 1;
  bool stepping = false;
  // R mask as gdb prints it (most significant byte first), a memory range relative
  // to rbp (reg 6) with a negative offset, an absolute one, and an X expression.
  auto more = parse_actions("R0fffff01M6,ffffffffffffffec,4M-1,601040,8X5,2200220c27-", stepping,
                            tp, env());
  ASSERT_TRUE(more) << more.error().message;
  EXPECT_TRUE(*more);
  ASSERT_EQ(tp.actions.size(), 4u);
  auto& r = std::get<CollectRegisters>(tp.actions[0]);
  ASSERT_EQ(r.mask.size(), 4u);
  EXPECT_EQ(r.mask[0], 0x01); // registers 0..7: only rax
  EXPECT_EQ(r.mask[3], 0x0f);
  auto& m = std::get<CollectMemory>(tp.actions[1]);
  EXPECT_EQ(m.basereg, 6);
  EXPECT_EQ(m.offset, -20);
  EXPECT_EQ(m.length, 4u);
  auto& a = std::get<CollectMemory>(tp.actions[2]);
  EXPECT_EQ(a.basereg, -1);
  EXPECT_EQ(a.offset, 0x601040);
  EXPECT_EQ(a.length, 8u);
  EXPECT_TRUE(std::holds_alternative<CollectExpr>(tp.actions[3]));
  EXPECT_EQ(tp.action_texts, (std::vector<std::string>{"R0fffff01", "M6,ffffffffffffffec,4",
                                                       "M-1,601040,8", "X5,2200220c27"}));
}

TEST(QtdpActions, SteppingPrefixOnlyOnFirstPacket) {
  Tracepoint tp;
  tp.number = 1;
  bool stepping = false;
  ASSERT_TRUE(parse_actions("R01-", stepping, tp, env()));
  ASSERT_TRUE(parse_actions("SR01-", stepping, tp, env()));
  // gdb sends later step actions without 'S'; they still belong to the steps.
  auto more = parse_actions("M-1,1000,4", stepping, tp, env());
  ASSERT_TRUE(more);
  EXPECT_FALSE(*more);
  EXPECT_EQ(tp.actions.size(), 1u);
  EXPECT_EQ(tp.step_actions.size(), 2u);
  EXPECT_EQ(tp.step_action_texts, (std::vector<std::string>{"R01", "M-1,1000,4"}));
}

TEST(QtdpActions, Errors) {
  Tracepoint tp;
  tp.number = 9;
  bool stepping = false;
  auto sdata = parse_actions("L", stepping, tp, env());
  ASSERT_FALSE(sdata);
  EXPECT_NE(sdata.error().message.find("_sdata"), std::string::npos);
  EXPECT_FALSE(parse_actions("M99,0,4", stepping, tp, env()));    // basereg beyond registers
  EXPECT_FALSE(parse_actions("M-1,1000,0", stepping, tp, env())); // empty range
  EXPECT_FALSE(parse_actions("Q", stepping, tp, env()));
  EXPECT_FALSE(parse_actions("X2,ff27", stepping, tp, env()));
  EXPECT_FALSE(parse_actions("R01-x", stepping, tp, env()));
}

TEST(QtdpSource, Decodes) {
  auto s = parse_qtdp_source("1:401136:at:0:b:2a30783430313133360a");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->number, 1u);
  EXPECT_EQ(s->type, "at");
  EXPECT_EQ(s->text, "*0x401136\n");
  EXPECT_FALSE(parse_qtdp_source("1:401136:at:0:b:2"));
}

// verify_expr keeps what the verifier proved, so collectors never decode
// bytecode again: per-pc stack depths and the TSVs read and written.
TEST(VerifyExpr, KeepsDepthsAndTsvs) {
  // getv 2; const8 1; add; setv 1; tracev 2; end
  std::vector<uint8_t> code = {0x2c, 0, 2, 0x22, 1, 0x02, 0x2d, 0, 1, 0x2e, 0, 2, 0x27};
  auto e = verify_expr(code, false, env(), "test");
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ(e->depth, (std::vector<int16_t>{0, -1, -1, 1, -1, 2, 1, -1, -1, 1, -1, -1, 1}));
  EXPECT_EQ(e->tsvs_read, (std::vector<uint32_t>{2}));
  EXPECT_EQ(e->tsvs_written, (std::vector<uint32_t>{1}));
}
