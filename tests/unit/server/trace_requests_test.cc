// The tracepoint packets' grammar (server/trace_requests.h): typed requests or errors.
#include <gtest/gtest.h>

#include "abi/amd64_regs.h"
#include "server/trace_requests.h"

using namespace gdbtrace;

namespace {

VerifyEnv env(uint32_t regs = GT_NUM_REGS_AVX) {
  VerifyEnv e;
  e.num_regs = regs;
  e.tsv_exists = [](uint32_t n) { return n == 1 || n == 2; };
  return e;
}

} // namespace

TEST(QtdpRequest, PlainTracepoint) {
  auto h = parse_qtdp("1:0000555555555139:E:0:0", env());
  ASSERT_TRUE(h) << h.error().message;
  EXPECT_EQ(h->tp.number, 1u);
  EXPECT_EQ(h->tp.address, 0x555555555139u);
  EXPECT_TRUE(h->tp.enabled);
  EXPECT_EQ(h->tp.step_count, 0u);
  EXPECT_FALSE(h->tp.fast);
  EXPECT_FALSE(h->tp.has_condition);
  EXPECT_FALSE(h->more);
}

TEST(QtdpRequest, AllOptionalFields) {
  // ftrace, disabled, while-stepping 5, pass 0x10, condition "$rax == 3", actions follow.
  // reg 0; const8 3; equal; end
  auto h = parse_qtdp("2:401136:D:5:10:F5:X7,26000022031327-", env());
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

TEST(QtdpRequest, BadConditionBytecodeNamesTheProblem) {
  // 0xff is not an opcode.
  auto h = parse_qtdp("3:401136:E:0:0:X2,ff27", env());
  ASSERT_FALSE(h);
  EXPECT_NE(h.error().message.find("tracepoint 3 condition"), std::string::npos)
      << h.error().message;
  EXPECT_NE(h.error().message.find("byte 0"), std::string::npos) << h.error().message;
}

TEST(QtdpRequest, ConditionMayNotTrace) {
  // const8 0; const8 4; trace; const8 1; end
  auto h = parse_qtdp("3:401136:E:0:0:X8,220022040c220127", env());
  ASSERT_FALSE(h);
}

TEST(QtdpRequest, RegisterNumberLimited) {
  // reg 76 is beyond the AVX register set; reg 60 beyond the non-AVX one.
  EXPECT_FALSE(parse_qtdp("4:401136:E:0:0:X4,26004c27", env()));
  EXPECT_TRUE(parse_qtdp("4:401136:E:0:0:X4,26003c27", env()));
  EXPECT_FALSE(parse_qtdp("4:401136:E:0:0:X4,26003c27", env(GT_NUM_REGS_NOAVX)));
}

TEST(QtdpRequest, UndefinedTsvRejected) {
  // getv 7; end  (only 1 and 2 exist)
  EXPECT_FALSE(parse_qtdp("5:401136:E:0:0:X4,2c000727", env()));
  EXPECT_TRUE(parse_qtdp("5:401136:E:0:0:X4,2c000227", env()));
}

TEST(QtdpRequest, Malformed) {
  EXPECT_FALSE(parse_qtdp("", env()));
  EXPECT_FALSE(parse_qtdp("1:401136", env()));
  EXPECT_FALSE(parse_qtdp("1:401136:Q:0:0", env()));
  EXPECT_FALSE(parse_qtdp("1:401136:E:0:0:X9,27", env())); // short
  EXPECT_FALSE(parse_qtdp("1:401136:E:0:0:S", env()));     // static tracepoint
  EXPECT_FALSE(parse_qtdp("0:401136:E:0:0", env()));       // number 0
  EXPECT_FALSE(parse_qtdp("1:401136:E:0:0garbage", env()));
}

TEST(QtdpActions, RegistersMemoryExpression) {
  // R mask as gdb prints it (most significant byte first), a memory range relative
  // to rbp (reg 6) with a negative offset, an absolute one, and an X expression.
  auto list =
      parse_action_list("R0fffff01M6,ffffffffffffffec,4M-1,601040,8X5,2200220c27-", 1, env());
  ASSERT_TRUE(list) << list.error().message;
  EXPECT_TRUE(list->more);
  EXPECT_FALSE(list->starts_stepping);
  ASSERT_EQ(list->actions.size(), 4u);
  auto& r = std::get<CollectRegisters>(list->actions[0]);
  ASSERT_EQ(r.mask.size(), 4u);
  EXPECT_EQ(r.mask[0], 0x01); // registers 0..7: only rax
  EXPECT_EQ(r.mask[3], 0x0f);
  auto& m = std::get<CollectMemory>(list->actions[1]);
  EXPECT_EQ(m.basereg, 6);
  EXPECT_EQ(m.offset, -20);
  EXPECT_EQ(m.length, 4u);
  auto& a = std::get<CollectMemory>(list->actions[2]);
  EXPECT_EQ(a.basereg, -1);
  EXPECT_EQ(a.offset, 0x601040);
  EXPECT_EQ(a.length, 8u);
  EXPECT_TRUE(std::holds_alternative<CollectExpr>(list->actions[3]));
  EXPECT_EQ(list->texts, (std::vector<std::string>{"R0fffff01", "M6,ffffffffffffffec,4",
                                                   "M-1,601040,8", "X5,2200220c27"}));
}

TEST(QtdpActions, SteppingPrefixMarksTheList) {
  auto first = parse_action_list("SR01-", 1, env());
  ASSERT_TRUE(first);
  EXPECT_TRUE(first->starts_stepping);
  EXPECT_TRUE(first->more);
  // gdb sends later step actions without 'S' (the engine keeps routing them to the steps).
  auto later = parse_action_list("M-1,1000,4", 1, env());
  ASSERT_TRUE(later);
  EXPECT_FALSE(later->starts_stepping);
  EXPECT_FALSE(later->more);
  EXPECT_EQ(later->texts, (std::vector<std::string>{"M-1,1000,4"}));
}

TEST(QtdpActions, Errors) {
  auto sdata = parse_action_list("L", 9, env());
  ASSERT_FALSE(sdata);
  EXPECT_NE(sdata.error().message.find("_sdata"), std::string::npos);
  EXPECT_NE(sdata.error().message.find("tracepoint 9"), std::string::npos);
  EXPECT_FALSE(parse_action_list("M99,0,4", 9, env()));    // basereg beyond registers
  EXPECT_FALSE(parse_action_list("M-1,1000,0", 9, env())); // empty range
  EXPECT_FALSE(parse_action_list("Q", 9, env()));
  EXPECT_FALSE(parse_action_list("X2,ff27", 9, env()));
  EXPECT_FALSE(parse_action_list("R01-x", 9, env()));
}

TEST(QtdpActions, BadListTravelsInsideTheRequest) {
  // The engine decides what a bad list means (drop or refuse), so the request
  // still names the tracepoint.
  auto req = parse_qtdp_actions("2:401000:Q", env());
  ASSERT_TRUE(req);
  EXPECT_EQ(req->number, 2u);
  EXPECT_EQ(req->address, 0x401000u);
  EXPECT_FALSE(req->list);
  EXPECT_FALSE(parse_qtdp_actions("2:zz:R01", env()));
}

TEST(QtdpSource, Decodes) {
  auto s = parse_qtdpsrc("1:401136:at:0:b:2a30783430313133360a");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->number, 1u);
  EXPECT_EQ(s->type, "at");
  EXPECT_EQ(s->text, "*0x401136\n");
  EXPECT_FALSE(parse_qtdpsrc("1:401136:at:0:b:2"));
}

TEST(TraceRequests, Qtdv) {
  auto tsv = parse_qtdv("3:fffffffffffffffe:0:6d79");
  ASSERT_TRUE(tsv) << tsv.error().message;
  EXPECT_EQ(tsv->number, 3u);
  EXPECT_EQ(tsv->initial, -2);
  EXPECT_FALSE(tsv->builtin);
  EXPECT_EQ(tsv->name, "my");
  EXPECT_FALSE(parse_qtdv("0:1:0:61"));         // number 0
  EXPECT_FALSE(parse_qtdv("100000000:1:0:61")); // beyond 32 bits
  EXPECT_FALSE(parse_qtdv("1:2:3:zz"));
}

TEST(TraceRequests, Qtro) {
  auto r = parse_qtro(":1000,1fff:3000,3003");
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, (std::vector<std::pair<uint64_t, uint64_t>>{{0x1000, 0x1fff}, {0x3000, 0x3003}}));
  EXPECT_TRUE(parse_qtro("")->empty());
  EXPECT_FALSE(parse_qtro(":1"));
  EXPECT_FALSE(parse_qtro(":1,2x"));
}

TEST(TraceRequests, Qtframe) {
  EXPECT_EQ(parse_qtframe("3")->kind, FrameQuery::Number);
  EXPECT_EQ(parse_qtframe("ffffffff")->kind, FrameQuery::None);
  auto pc = parse_qtframe("pc:401000");
  ASSERT_TRUE(pc);
  EXPECT_EQ(pc->kind, FrameQuery::Pc);
  EXPECT_EQ(pc->a, 0x401000u);
  auto out = parse_qtframe("outside:10:20");
  ASSERT_TRUE(out);
  EXPECT_EQ(out->kind, FrameQuery::OutsideRange);
  EXPECT_EQ(out->b, 0x20u);
  EXPECT_EQ(parse_qtframe("tdp:2")->kind, FrameQuery::Tracepoint);
  for (const char* bad : {"", "pc:", "range:1", "tdp:", "zz"})
    EXPECT_FALSE(parse_qtframe(bad)) << bad;
}

TEST(TraceRequests, BufferSizeNotesSaveAndRanges) {
  EXPECT_FALSE(parse_qtbuffer_size("-1")->has_value()); // the default size
  EXPECT_EQ(parse_qtbuffer_size("1000")->value(), 0x1000u);
  EXPECT_FALSE(parse_qtbuffer_size("zz"));
  // Any size parses; the engine clamps it to what the machine holds (test_debug_rsp checks that).
  EXPECT_EQ(parse_qtbuffer_size("ffffffffffffffff")->value(), ~uint64_t{0});

  auto notes = parse_qtnotes("user:6a6f;tstop:646f6e65;");
  ASSERT_TRUE(notes);
  EXPECT_EQ(notes->user, "jo");
  EXPECT_FALSE(notes->notes); // absent: unchanged
  EXPECT_EQ(notes->tstop, "done");
  EXPECT_FALSE(parse_qtnotes("user:zz;"));

  EXPECT_EQ(*parse_qtsave("2f74"), "/t");
  EXPECT_FALSE(parse_qtsave(""));

  auto range = parse_byte_range("10,20", "qTBuffer");
  ASSERT_TRUE(range);
  EXPECT_EQ(range->offset, 0x10u);
  EXPECT_EQ(range->length, 0x20u);
  auto bad = parse_byte_range("10", "qTBuffer");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message, "malformed qTBuffer");
  EXPECT_FALSE(parse_tracepoint_ref("1", "qTP"));
  EXPECT_EQ(parse_tracepoint_ref("1:401000", "qTP")->address, 0x401000u);
  EXPECT_EQ(*parse_qtv("5"), 5u);
  EXPECT_FALSE(parse_qtv(""));
}
