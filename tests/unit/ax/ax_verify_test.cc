// The verifier against hostile bytecode: every rejection carries the right
// status and the pc of the offending instruction.
#include <gtest/gtest.h>

#include "ax_test_util.h"

using namespace axtest;

namespace {

class AxVerify : public ::testing::Test {
protected:
  FakeTarget t;
  ax_verified info{};
  uint32_t err_pc = 0xdead;
  int verify(const std::vector<uint8_t>& code, bool allow_trace = true) {
    ax_verify_ctx ctx = t.vctx(allow_trace);
    return ax_verify(code.data(), uint32_t(code.size()), &ctx, &info, &err_pc);
  }
  int verify(const Asm& a, bool allow_trace = true) { return verify(a.code, allow_trace); }
};

TEST_F(AxVerify, AcceptsMinimalProgram) {
  EXPECT_EQ(verify(Asm().op(end)), AX_OK);
  EXPECT_EQ(info.code_len, 1u);
  EXPECT_EQ(info.max_stack, 0u);
  EXPECT_EQ(info.num_insns, 1u);
}

TEST_F(AxVerify, ComputesMaxStackAndUses) {
  t.tsv[3] = 0;
  EXPECT_EQ(
      verify(
          Asm().c8(1).c8(2).c8(3).op(add).op(add).op2(reg, GT_RAX).op(ref8).op2(setv, 3).op(end)),
      AX_OK);
  EXPECT_EQ(info.max_stack, 3u);
  EXPECT_TRUE(info.uses_mem);
  EXPECT_TRUE(info.uses_tsv);
  EXPECT_TRUE(info.uses_regs);
  EXPECT_FALSE(info.uses_trace);
  EXPECT_FALSE(info.uses_printf);
  EXPECT_FALSE(info.has_backward_jump);
}

TEST_F(AxVerify, EmptyAndTooLong) {
  EXPECT_EQ(verify(std::vector<uint8_t>{}), AX_ERR_NO_END);
  std::vector<uint8_t> big(AX_MAX_CODE_LEN + 1, end);
  EXPECT_EQ(verify(big), AX_ERR_TOO_LONG);
  std::vector<uint8_t> max(AX_MAX_CODE_LEN, end);
  EXPECT_EQ(verify(max), AX_OK); // unreachable `end`s are fine
}

TEST_F(AxVerify, UnknownOpcodes) {
  for (int op : {0x00, 0x31, 0x35, 0x80, 0xff}) {
    EXPECT_EQ(verify(Asm().c8(1).op(uint8_t(op)).op(end)), AX_ERR_UNKNOWN_OP) << int(op);
    EXPECT_EQ(err_pc, 2u);
  }
  // Even in unreachable code.
  EXPECT_EQ(verify(Asm().op(end).op(0xee)), AX_ERR_UNKNOWN_OP);
  EXPECT_EQ(err_pc, 1u);
}

TEST_F(AxVerify, FloatOpsRejected) {
  for (int op :
       {0x01, int(ref_float), int(ref_double), int(ref_long_double), int(l_to_d), int(d_to_l)}) {
    EXPECT_EQ(verify(Asm().c8(1).op(uint8_t(op)).op(end)), AX_ERR_FLOAT_OP) << int(op);
    EXPECT_EQ(err_pc, 2u);
  }
}

TEST_F(AxVerify, TruncatedOperands) {
  EXPECT_EQ(verify(std::vector<uint8_t>{const8}), AX_ERR_TRUNCATED);
  EXPECT_EQ(verify(std::vector<uint8_t>{const16, 1}), AX_ERR_TRUNCATED);
  EXPECT_EQ(verify(std::vector<uint8_t>{const8, 1, const32, 1, 2, 3}), AX_ERR_TRUNCATED);
  EXPECT_EQ(err_pc, 2u);
  EXPECT_EQ(verify(std::vector<uint8_t>{const64, 1, 2, 3, 4, 5, 6, 7}), AX_ERR_TRUNCATED);
  EXPECT_EQ(verify(std::vector<uint8_t>{goto_, 0}), AX_ERR_TRUNCATED);
  EXPECT_EQ(verify(std::vector<uint8_t>{reg, 0}), AX_ERR_TRUNCATED);
  // printf whose string runs past the end
  EXPECT_EQ(verify(std::vector<uint8_t>{printf_, 0, 0, 5, 'a', 0}), AX_ERR_TRUNCATED);
  EXPECT_EQ(verify(std::vector<uint8_t>{printf_, 0, 0}), AX_ERR_TRUNCATED);
}

TEST_F(AxVerify, JumpOutOfRange) {
  EXPECT_EQ(verify(Asm().op2(goto_, 100).op(end)), AX_ERR_BAD_JUMP);
  EXPECT_EQ(err_pc, 0u);
  EXPECT_EQ(verify(Asm().c8(1).op2(if_goto, 6).op(end)), AX_ERR_BAD_JUMP); // == len
  EXPECT_EQ(err_pc, 2u);
  EXPECT_EQ(verify(Asm().c8(1).op2(if_goto, 0xffff).op(end)), AX_ERR_BAD_JUMP);
}

TEST_F(AxVerify, JumpIntoTheMiddleOfAnInstruction) {
  // const16 0x27 0x27 hides an `end` in its operand; jumping there is refused.
  Asm a;
  a.op2(goto_, 4).op(const16).u8(end).u8(end).op(end);
  EXPECT_EQ(verify(a), AX_ERR_BAD_JUMP);
  EXPECT_EQ(err_pc, 0u);
}

TEST_F(AxVerify, StackOverflow) {
  Asm a;
  for (unsigned i = 0; i <= AX_MAX_STACK; i++)
    a.c8(1);
  a.op(end);
  EXPECT_EQ(verify(a), AX_ERR_STACK_OVERFLOW);
  EXPECT_EQ(err_pc, 2u * AX_MAX_STACK);
  Asm b;
  for (unsigned i = 0; i < AX_MAX_STACK; i++)
    b.c8(1);
  b.op(end);
  EXPECT_EQ(verify(b), AX_OK);
  EXPECT_EQ(info.max_stack, AX_MAX_STACK);
  // dup chain
  Asm c;
  c.c8(1);
  for (unsigned i = 0; i < AX_MAX_STACK; i++)
    c.op(dup_);
  c.op(end);
  EXPECT_EQ(verify(c), AX_ERR_STACK_OVERFLOW);
}

TEST_F(AxVerify, DupLoopCannotGrowTheStack) {
  // L: dup; goto L -- each trip adds a value: the depths at L disagree.
  Asm a;
  a.c8(1).op(dup_).op2(goto_, 2).op(end);
  EXPECT_EQ(verify(a), AX_ERR_INCONSISTENT_STACK);
  EXPECT_EQ(err_pc, 2u);
  // Same through a conditional branch.
  Asm b;
  b.c8(1).op(dup_).op(dup_).op2(if_goto, 2).op(end);
  EXPECT_EQ(verify(b), AX_ERR_INCONSISTENT_STACK);
}

TEST_F(AxVerify, InconsistentJoin) {
  // if (c) push 1 else push 1; push 2 -- one arm pushes two values.
  Asm a;
  a.c8(1).op2(if_goto, 10).c8(1).op2(goto_, 14).c8(1).c8(2).op(end);
  //   0     2              5      7             10    12    14
  EXPECT_EQ(verify(a), AX_ERR_INCONSISTENT_STACK);
  EXPECT_EQ(err_pc, 14u);
}

TEST_F(AxVerify, StackUnderflow) {
  EXPECT_EQ(verify(Asm().op(add).op(end)), AX_ERR_STACK_UNDERFLOW);
  EXPECT_EQ(err_pc, 0u);
  EXPECT_EQ(verify(Asm().c8(1).op(add).op(end)), AX_ERR_STACK_UNDERFLOW);
  EXPECT_EQ(err_pc, 2u);
  EXPECT_EQ(verify(Asm().op(pop).op(end)), AX_ERR_STACK_UNDERFLOW);
  EXPECT_EQ(verify(Asm().c8(1).c8(2).op(rot).op(end)), AX_ERR_STACK_UNDERFLOW);
  EXPECT_EQ(verify(Asm().c8(1).op(swap).op(end)), AX_ERR_STACK_UNDERFLOW);
  EXPECT_EQ(verify(Asm().op2(if_goto, 3).op(end)), AX_ERR_STACK_UNDERFLOW);
  EXPECT_EQ(verify(Asm().c8(1).op(trace).op(end)), AX_ERR_STACK_UNDERFLOW);
  // Only on one path: the branch skips the push.
  Asm a;
  a.c8(0).op2(if_goto, 7).c8(5).op(pop).op(end);   // jump lands on pop with nothing pushed
  EXPECT_EQ(verify(a), AX_ERR_INCONSISTENT_STACK); // the two paths disagree at pop
  Asm b;
  b.c8(0).op2(if_goto, 6).op(end).op(pop).op(end); // taken path pops an empty stack
  EXPECT_EQ(verify(b), AX_ERR_STACK_UNDERFLOW);
  EXPECT_EQ(err_pc, 6u);
}

TEST_F(AxVerify, PickOperand) {
  EXPECT_EQ(verify(Asm().c8(1).c8(2).op1(pick, 1).op(end)), AX_OK);
  EXPECT_EQ(verify(Asm().c8(1).c8(2).op1(pick, 2).op(end)), AX_ERR_STACK_UNDERFLOW);
  EXPECT_EQ(err_pc, 4u);
  EXPECT_EQ(verify(Asm().op1(pick, 0).op(end)), AX_ERR_STACK_UNDERFLOW);
  EXPECT_EQ(verify(Asm().c8(1).op1(pick, 255).op(end)), AX_ERR_STACK_UNDERFLOW);
}

TEST_F(AxVerify, ExtOperand) {
  EXPECT_EQ(verify(Asm().c8(1).op1(ext, 0).op(end)), AX_ERR_BAD_OPERAND);
  EXPECT_EQ(err_pc, 2u);
  EXPECT_EQ(verify(Asm().c8(1).op1(ext, 65).op(end)), AX_ERR_BAD_OPERAND);
  EXPECT_EQ(verify(Asm().c8(1).op1(zero_ext, 0).op(end)), AX_ERR_BAD_OPERAND);
  EXPECT_EQ(verify(Asm().c8(1).op1(zero_ext, 200).op(end)), AX_ERR_BAD_OPERAND);
  EXPECT_EQ(verify(Asm().c8(1).op1(ext, 64).op1(zero_ext, 1).op(end)), AX_OK);
}

TEST_F(AxVerify, RegisterNumbers) {
  EXPECT_EQ(verify(Asm().op2(reg, GT_NUM_REGS_AVX - 1).op(end)), AX_OK);
  EXPECT_EQ(verify(Asm().op2(reg, GT_NUM_REGS_AVX).op(end)), AX_ERR_BAD_REG);
  EXPECT_EQ(err_pc, 0u);
  EXPECT_EQ(verify(Asm().op2(reg, 0xffff).op(end)), AX_ERR_BAD_REG);
  ax_verify_ctx ctx = t.vctx();
  ctx.num_regs = GT_NUM_REGS_NOAVX;
  Asm a;
  a.op2(reg, GT_YMM0H).op(end);
  EXPECT_EQ(ax_verify(a.code.data(), uint32_t(a.code.size()), &ctx, &info, &err_pc),
            AX_ERR_BAD_REG);
}

TEST_F(AxVerify, UndefinedTraceStateVariable) {
  t.tsv[1] = 0;
  EXPECT_EQ(verify(Asm().op2(getv, 1).op(end)), AX_OK);
  EXPECT_EQ(verify(Asm().op2(getv, 2).op(end)), AX_ERR_BAD_TSV);
  EXPECT_EQ(verify(Asm().c8(1).op2(setv, 7).op(end)), AX_ERR_BAD_TSV);
  EXPECT_EQ(err_pc, 2u);
  EXPECT_EQ(verify(Asm().op2(tracev, 9).op(end)), AX_ERR_BAD_TSV);
  // Without a tsv_exists callback any number is accepted.
  ax_verify_ctx ctx = t.vctx();
  ctx.tsv_exists = nullptr;
  Asm a;
  a.op2(getv, 500).op(end);
  EXPECT_EQ(ax_verify(a.code.data(), uint32_t(a.code.size()), &ctx, &info, &err_pc), AX_OK);
}

TEST_F(AxVerify, TraceOpsInACondition) {
  t.tsv[1] = 0;
  std::vector<Asm> progs = {
      Asm().c8(1).c8(4).op(trace).op(end),   Asm().c8(1).op1(trace_quick, 4).op(end),
      Asm().c8(1).c8(4).op(tracenz).op(end), Asm().c8(1).op2(trace16, 4).op(end),
      Asm().op2(tracev, 1).op(end),
  };
  for (auto& p : progs) {
    EXPECT_EQ(verify(p, false), AX_ERR_NOT_ALLOWED);
    EXPECT_EQ(verify(p, true), AX_OK);
    EXPECT_TRUE(info.uses_trace);
  }
}

TEST_F(AxVerify, FallingOffTheEnd) {
  EXPECT_EQ(verify(Asm().c8(1)), AX_ERR_NO_END);
  EXPECT_EQ(err_pc, 0u);
  EXPECT_EQ(verify(Asm().c8(1).op(pop)), AX_ERR_NO_END);
  EXPECT_EQ(err_pc, 2u);
  // The not-taken side of the last if_goto falls off.
  EXPECT_EQ(verify(Asm().c8(1).op2(if_goto, 6).op(end).c8(0).op2(if_goto, 0)), AX_ERR_NO_END);
  EXPECT_EQ(err_pc, 8u);
  // ... but unreachable tail code is fine when it is decodable.
  EXPECT_EQ(verify(Asm().op(end).c8(1)), AX_OK);
}

TEST_F(AxVerify, MalformedPrintf) {
  auto prog = [](std::vector<uint8_t> printf_insn) {
    std::vector<uint8_t> c = {const8, 0, const8, 0};
    c.insert(c.end(), printf_insn.begin(), printf_insn.end());
    c.push_back(end);
    return c;
  };
  // well-formed: "hi" 0 args
  EXPECT_EQ(verify(prog({printf_, 0, 0, 3, 'h', 'i', 0})), AX_OK);
  EXPECT_TRUE(info.uses_printf);
  // not NUL-terminated
  EXPECT_EQ(verify(prog({printf_, 0, 0, 2, 'h', 'i'})), AX_ERR_BAD_PRINTF);
  EXPECT_EQ(err_pc, 4u);
  // zero-length string
  EXPECT_EQ(verify(prog({printf_, 0, 0, 0})), AX_ERR_BAD_PRINTF);
  // embedded NUL
  EXPECT_EQ(verify(prog({printf_, 0, 0, 3, 'h', 0, 0})), AX_ERR_BAD_PRINTF);
  // conversions != nargs
  EXPECT_EQ(verify(prog({printf_, 0, 0, 3, '%', 'd', 0})), AX_ERR_BAD_PRINTF);
  // nargs larger than the stack holds: underflow
  EXPECT_EQ(verify(prog({printf_, 1, 0, 3, '%', 'd', 0})), AX_ERR_STACK_UNDERFLOW);
  // unsupported conversions
  for (std::string bad : {"%f", "%n", "%*d", "%ls", "%lc", "%Lf", "%q", "%", "%5%", "%#u", "%+x",
                          "%.3p", "%05s", "\\q", "\\", "a\"b"}) {
    std::vector<uint8_t> insn = {printf_, 0, 0, uint8_t(bad.size() + 1)};
    insn.insert(insn.end(), bad.begin(), bad.end());
    insn.push_back(0);
    EXPECT_EQ(verify(prog(insn)), AX_ERR_BAD_PRINTF) << bad;
  }
  // printf needs function and channel under its arguments
  EXPECT_EQ(verify(Asm().c8(0).printf("x", 0).op(end)), AX_ERR_STACK_UNDERFLOW);
}

TEST_F(AxVerify, BadArguments) {
  uint8_t code[] = {end};
  EXPECT_EQ(ax_verify(code, 1, nullptr, &info, &err_pc), AX_ERR_BAD_ARG);
  ax_verify_ctx ctx = t.vctx();
  EXPECT_EQ(ax_verify(nullptr, 1, &ctx, &info, &err_pc), AX_ERR_BAD_ARG);
  EXPECT_EQ(ax_verify(code, 1, &ctx, nullptr, nullptr), AX_OK); // out/err_pc optional
}

TEST_F(AxVerify, CallerProvidedScratch) {
  auto ws = std::make_unique<ax_verify_scratch>();
  ax_verify_ctx ctx = t.vctx();
  ctx.scratch = ws.get();
  Asm a;
  a.c8(2).c8(3).op(mul).op(end);
  EXPECT_EQ(ax_verify(a.code.data(), uint32_t(a.code.size()), &ctx, &info, &err_pc), AX_OK);
  EXPECT_EQ(info.max_stack, 2u);
}

// What the verifier proved stays in the caller's scratch: the stack depth
// before every instruction (what the eBPF translator lays its stack out by).
TEST_F(AxVerify, ReportsTheDepthBeforeEachInstruction) {
  auto ws = std::make_unique<ax_verify_scratch>();
  ax_verify_ctx ctx = t.vctx();
  ctx.scratch = ws.get();
  Asm a; // 0 const8 1; 2 if_goto 8; 5 const8 2; 7 pop; 8 const8 3; 10 end
  a.c8(1).op2(if_goto, 8).c8(2).op(pop).c8(3).op(end);
  ASSERT_EQ(ax_verify(a.code.data(), uint32_t(a.code.size()), &ctx, &info, &err_pc), AX_OK);
  std::vector<int> depths;
  for (uint32_t pc = 0; pc < a.code.size(); pc++)
    depths.push_back(ax_depth_before(ws.get(), pc));
  EXPECT_EQ(depths, (std::vector<int>{0, -1, 1, -1, -1, 0, -1, 1, 0, -1, 1}));
}

TEST_F(AxVerify, ReportsTheTsvsReadAndWritten) {
  t.tsv[3] = 0;
  t.tsv[7] = 0;
  std::vector<std::pair<uint32_t, uint32_t>> seen;
  ax_verify_ctx ctx = t.vctx();
  ctx.opaque = &seen;
  ctx.tsv_exists = nullptr;
  ctx.note_tsv = [](void* opaque, uint32_t num, uint32_t access) {
    static_cast<std::vector<std::pair<uint32_t, uint32_t>>*>(opaque)->push_back({num, access});
  };
  Asm a;
  a.op2(getv, 3).op2(setv, 7).op2(tracev, 3).op(end);
  ASSERT_EQ(ax_verify(a.code.data(), uint32_t(a.code.size()), &ctx, &info, &err_pc), AX_OK);
  EXPECT_EQ(seen, (std::vector<std::pair<uint32_t, uint32_t>>{
                      {3, AX_TSV_READ}, {7, AX_TSV_WRITE}, {3, AX_TSV_READ}}));
}

TEST_F(AxVerify, StrerrorCoversEveryStatus) {
  for (int s = AX_OK; s >= AX_ERR_BAD_ARG; s--) {
    std::string text = ax_strerror(s);
    EXPECT_NE(text, "unknown agent-expression error") << s;
  }
  EXPECT_STREQ(ax_strerror(-1000), "unknown agent-expression error");
  EXPECT_STREQ(ax_op_name(0x22), "const8");
  EXPECT_STREQ(ax_op_name(0x34), "printf");
  EXPECT_EQ(ax_op_name(0x31), nullptr);
}

} // namespace

namespace {

// Every opcode gdb 13's ax.def defines is known, with the right operand size:
// a program "push 3 values; OP <operands>; end" verifies for each integer op.
TEST(AxVerifyTable, EveryIntegerOpcodeIsKnown) {
  FakeTarget t;
  t.tsv[1] = 0;
  const struct {
    uint8_t op;
    std::vector<uint8_t> operands;
  } ops[] = {
      {add, {}},
      {sub, {}},
      {mul, {}},
      {div_signed, {}},
      {div_unsigned, {}},
      {rem_signed, {}},
      {rem_unsigned, {}},
      {lsh, {}},
      {rsh_signed, {}},
      {rsh_unsigned, {}},
      {trace, {}},
      {trace_quick, {4}},
      {log_not, {}},
      {bit_and, {}},
      {bit_or, {}},
      {bit_xor, {}},
      {bit_not, {}},
      {equal, {}},
      {less_signed, {}},
      {less_unsigned, {}},
      {ext, {8}},
      {ref8, {}},
      {ref16, {}},
      {ref32, {}},
      {ref64, {}},
      {if_goto, {0, 11}},
      {goto_, {0, 11}},
      {const8, {1}},
      {const16, {0, 1}},
      {const32, {0, 0, 0, 1}},
      {const64, {0, 0, 0, 0, 0, 0, 0, 1}},
      {reg, {0, 1}},
      {end, {}},
      {dup_, {}},
      {pop, {}},
      {zero_ext, {16}},
      {swap, {}},
      {getv, {0, 1}},
      {setv, {0, 1}},
      {tracev, {0, 1}},
      {tracenz, {}},
      {trace16, {0, 4}},
      {pick, {2}},
      {rot, {}},
  };
  for (auto& o : ops) {
    Asm a;
    a.c8(1).c8(2).c8(3).op(o.op); // op at pc 6
    for (uint8_t b : o.operands)
      a.u8(b);
    while (a.code.size() < 11)
      a.op(end); // jump target 11 is an `end`
    a.op(end);
    ax_verify_ctx ctx = t.vctx();
    ax_verified info{};
    uint32_t pc = 0;
    EXPECT_EQ(ax_verify(a.code.data(), uint32_t(a.code.size()), &ctx, &info, &pc), AX_OK)
        << ax_op_name(o.op) << " at " << pc;
    EXPECT_NE(ax_op_name(o.op), nullptr);
  }
  // printf (its operand is variable-length)
  Asm p;
  p.c8(0).c8(0).printf("hello", 0).op(end);
  ax_verify_ctx ctx = t.vctx();
  ax_verified info{};
  EXPECT_EQ(ax_verify(p.code.data(), uint32_t(p.code.size()), &ctx, &info, nullptr), AX_OK);
  EXPECT_TRUE(info.uses_printf);
  EXPECT_FALSE(info.uses_mem); // no %s
}

} // namespace
