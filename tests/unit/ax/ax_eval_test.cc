// Semantics of every integer opcode, checked against gdbserver/ax.cc and the
// GDB manual ("Bytecode Descriptions").
#include <gtest/gtest.h>

#include "ax_test_util.h"

using namespace axtest;

namespace {

class AxEval : public ::testing::Test {
protected:
  FakeTarget t;
  // Runs CODE (verify + eval), expecting success; returns the result.
  uint64_t value(Asm a) {
    AxRun r = run_ax(t, a.code);
    EXPECT_EQ(r.verify, AX_OK) << ax_strerror(r.verify) << " at pc " << r.err_pc;
    EXPECT_EQ(r.eval, AX_OK) << ax_strerror(r.eval);
    return r.result;
  }
  uint64_t bin(uint64_t a, uint64_t b, uint8_t o) {
    return value(Asm().c64(a).c64(b).op(o).op(end));
  }
  int eval_error(Asm a, uint32_t budget = 0) {
    AxRun r = run_ax(t, a.code, true, budget);
    EXPECT_EQ(r.verify, AX_OK) << ax_strerror(r.verify) << " at pc " << r.err_pc;
    return r.eval;
  }
};

constexpr uint64_t M1 = ~0ull; // -1
constexpr uint64_t MIN64 = 0x8000000000000000ull;

TEST_F(AxEval, ConstantsAreBigEndianAndZeroExtended) {
  EXPECT_EQ(value(Asm().c8(0xfe).op(end)), 0xfeu);
  EXPECT_EQ(value(Asm().c16(0xbeef).op(end)), 0xbeefu);
  EXPECT_EQ(value(Asm().c32(0xdeadbeef).op(end)), 0xdeadbeefu);
  EXPECT_EQ(value(Asm().c64(0x0123456789abcdefull).op(end)), 0x0123456789abcdefull);
  // Raw bytes, as on the wire: const16 0x01 0x02 is 0x0102.
  EXPECT_EQ(value(Asm().op(const16).u8(1).u8(2).op(end)), 0x0102u);
}

TEST_F(AxEval, EmptyStackAtEndGivesZero) {
  EXPECT_EQ(value(Asm().op(end)), 0u);
}

TEST_F(AxEval, Arithmetic) {
  EXPECT_EQ(bin(7, 5, add), 12u);
  EXPECT_EQ(bin(M1, 1, add), 0u);          // wraps
  EXPECT_EQ(bin(5, 7, sub), uint64_t(-2)); // a b sub == a - b
  EXPECT_EQ(bin(6, 7, mul), 42u);
  EXPECT_EQ(bin(uint64_t(-7), 2, div_signed), uint64_t(-3)); // truncates toward zero
  EXPECT_EQ(bin(uint64_t(-7), 2, rem_signed), uint64_t(-1));
  EXPECT_EQ(bin(uint64_t(-7), 2, div_unsigned), (uint64_t(-7)) / 2);
  EXPECT_EQ(bin(17, 5, rem_unsigned), 2u);
  EXPECT_EQ(bin(MIN64, M1, div_signed), MIN64); // overflow wraps, no trap
  EXPECT_EQ(bin(MIN64, M1, rem_signed), 0u);
}

TEST_F(AxEval, DivisionByZero) {
  for (uint8_t o : {div_signed, div_unsigned, rem_signed, rem_unsigned})
    EXPECT_EQ(eval_error(Asm().c8(1).c8(0).op(o).op(end)), AX_ERR_DIV_ZERO) << int(o);
}

TEST_F(AxEval, Shifts) {
  EXPECT_EQ(bin(1, 4, lsh), 16u);
  EXPECT_EQ(bin(0x80, 4, rsh_unsigned), 8u);
  EXPECT_EQ(bin(uint64_t(-64), 2, rsh_signed), uint64_t(-16));
  EXPECT_EQ(bin(MIN64, 63, rsh_unsigned), 1u);
  EXPECT_EQ(bin(MIN64, 63, rsh_signed), M1);
  EXPECT_EQ(bin(5, 0, rsh_signed), 5u);
  // Counts >= 64 are defined here (C and x86 disagree): 0, or the sign fill.
  EXPECT_EQ(bin(1, 64, lsh), 0u);
  EXPECT_EQ(bin(M1, 200, rsh_unsigned), 0u);
  EXPECT_EQ(bin(uint64_t(-5), 64, rsh_signed), M1);
  EXPECT_EQ(bin(5, 64, rsh_signed), 0u);
}

TEST_F(AxEval, Logic) {
  EXPECT_EQ(bin(0xf0, 0x3c, bit_and), 0x30u);
  EXPECT_EQ(bin(0xf0, 0x0f, bit_or), 0xffu);
  EXPECT_EQ(bin(0xff, 0x0f, bit_xor), 0xf0u);
  EXPECT_EQ(value(Asm().c8(0).op(bit_not).op(end)), M1);
  EXPECT_EQ(value(Asm().c8(0).op(log_not).op(end)), 1u);
  EXPECT_EQ(value(Asm().c8(9).op(log_not).op(end)), 0u);
}

TEST_F(AxEval, Comparisons) {
  EXPECT_EQ(bin(3, 3, equal), 1u);
  EXPECT_EQ(bin(3, 4, equal), 0u);
  EXPECT_EQ(bin(M1, 1, less_signed), 1u); // -1 < 1
  EXPECT_EQ(bin(M1, 1, less_unsigned), 0u);
  EXPECT_EQ(bin(1, M1, less_unsigned), 1u);
  EXPECT_EQ(bin(MIN64, 0, less_signed), 1u);
  EXPECT_EQ(bin(2, 2, less_signed), 0u);
}

TEST_F(AxEval, ExtAndZeroExt) {
  EXPECT_EQ(value(Asm().c8(0x80).op1(ext, 8).op(end)), uint64_t(-128));
  EXPECT_EQ(value(Asm().c8(0x7f).op1(ext, 8).op(end)), 0x7fu);
  EXPECT_EQ(value(Asm().c16(0x8001).op1(ext, 16).op(end)), uint64_t(int64_t(int16_t(0x8001))));
  EXPECT_EQ(value(Asm().c32(0xfffffffe).op1(ext, 32).op(end)), uint64_t(-2));
  EXPECT_EQ(value(Asm().c64(0x1ffffffffull).op1(ext, 33).op(end)), M1);
  EXPECT_EQ(value(Asm().c8(1).op1(ext, 1).op(end)), M1);                  // one-bit field: 1 is -1
  EXPECT_EQ(value(Asm().c64(MIN64 | 5).op1(ext, 64).op(end)), MIN64 | 5); // gdb emits ext 64
  EXPECT_EQ(value(Asm().c64(M1).op1(zero_ext, 8).op(end)), 0xffu);
  EXPECT_EQ(value(Asm().c64(M1).op1(zero_ext, 32).op(end)), 0xffffffffu);
  EXPECT_EQ(value(Asm().c64(M1).op1(zero_ext, 63).op(end)), M1 >> 1);
  EXPECT_EQ(value(Asm().c64(M1).op1(zero_ext, 64).op(end)), M1);
}

TEST_F(AxEval, StackOps) {
  // dup, pop
  EXPECT_EQ(value(Asm().c8(3).op(dup_).op(add).op(end)), 6u);
  EXPECT_EQ(value(Asm().c8(1).c8(2).op(pop).op(end)), 1u);
  // swap: a b => b a
  EXPECT_EQ(value(Asm().c8(10).c8(3).op(swap).op(sub).op(end)), uint64_t(-7));
  // rot: a b c => c a b (top is b)
  EXPECT_EQ(value(Asm().c8(1).c8(2).c8(3).op(rot).op(end)), 2u);
  EXPECT_EQ(value(Asm().c8(1).c8(2).c8(3).op(rot).op(pop).op(end)), 1u);
  EXPECT_EQ(value(Asm().c8(1).c8(2).c8(3).op(rot).op(pop).op(pop).op(end)), 3u);
  // pick n copies the value n below the top; pick 0 == dup
  EXPECT_EQ(value(Asm().c8(7).c8(8).c8(9).op1(pick, 0).op(end)), 9u);
  EXPECT_EQ(value(Asm().c8(7).c8(8).c8(9).op1(pick, 2).op(end)), 7u);
}

TEST_F(AxEval, Jumps) {
  // if_goto pops its condition and jumps when nonzero.
  Asm a;
  a.c8(1).op2(if_goto, 8).c8(11).op(end).c8(22).op(end);
  //     0        2        5      7      8      10
  EXPECT_EQ(value(a), 22u);
  Asm b;
  b.c8(0).op2(if_goto, 8).c8(11).op(end).c8(22).op(end);
  EXPECT_EQ(value(b), 11u);
  Asm c;
  c.op2(goto_, 5).c8(1).c8(2).op(end); // skips const8 1 (bytes 3..4)
  EXPECT_EQ(value(c), 2u);
}

TEST_F(AxEval, CountingLoop) {
  // i = 10; do i = i - 1 while (i != 0) -- a backward if_goto with a stack of one.
  Asm a;
  a.c8(10);
  uint16_t top = a.here();
  a.c8(1).op(sub).op(dup_).op2(if_goto, top).op(end);
  AxRun r = run_ax(t, a.code);
  ASSERT_EQ(r.verify, AX_OK);
  EXPECT_TRUE(r.info.has_backward_jump);
  EXPECT_EQ(r.eval, AX_OK);
  EXPECT_EQ(r.result, 0u);
}

TEST_F(AxEval, InfiniteLoopHitsStepBudget) {
  Asm a;
  a.op2(goto_, 0).op(end);
  EXPECT_EQ(eval_error(a), AX_ERR_STEP_BUDGET);
  EXPECT_EQ(eval_error(a, 50), AX_ERR_STEP_BUDGET);
  // A loop that needs 31 steps fits a budget of 40 but not 20.
  Asm b;
  b.c8(10);
  uint16_t top = b.here();
  b.c8(1).op(sub).op(dup_).op2(if_goto, top).op(end);
  EXPECT_EQ(eval_error(b, 20), AX_ERR_STEP_BUDGET);
  EXPECT_EQ(eval_error(b, 60), AX_OK);
}

// steps_used reports what an evaluation took, on success and on running out,
// so the kernel module spends one budget across a hit's programs.
TEST_F(AxEval, StepsUsedIsReported) {
  Asm a;
  a.c8(10);
  uint16_t top = a.here();
  a.c8(1).op(sub).op(dup_).op2(if_goto, top).op(end); // 1 + 10 * 4 + 1 steps
  ax_verify_ctx ctx = t.vctx();
  ax_verified v{};
  ASSERT_EQ(ax_verify(a.code.data(), uint32_t(a.code.size()), &ctx, &v, nullptr), AX_OK);
  uint32_t used = 0;
  ax_env env{};
  env.steps_used = &used;
  EXPECT_EQ(ax_eval(a.code.data(), &v, &env, nullptr), AX_OK);
  EXPECT_EQ(used, 42u);
  env.step_budget = 20;
  EXPECT_EQ(ax_eval(a.code.data(), &v, &env, nullptr), AX_ERR_STEP_BUDGET);
  EXPECT_EQ(used, 20u);
}

TEST_F(AxEval, RefLoadsAreZeroExtendedLittleEndian) {
  t.map(0x1000, {0xf0, 0xde, 0xbc, 0x9a, 0x78, 0x56, 0x34, 0x12});
  EXPECT_EQ(value(Asm().c16(0x1000).op(ref8).op(end)), 0xf0u);
  EXPECT_EQ(value(Asm().c16(0x1000).op(ref16).op(end)), 0xdef0u);
  EXPECT_EQ(value(Asm().c16(0x1000).op(ref32).op(end)), 0x9abcdef0u);
  EXPECT_EQ(value(Asm().c16(0x1000).op(ref64).op(end)), 0x123456789abcdef0ull);
  // gdb sign-extends with ext after the load:
  EXPECT_EQ(value(Asm().c16(0x1000).op(ref8).op1(ext, 8).op(end)), uint64_t(-16));
}

TEST_F(AxEval, MemoryFailureIsAnError) {
  t.map(0x1000, {1, 2, 3, 4});
  EXPECT_EQ(eval_error(Asm().c16(0x2000).op(ref8).op(end)), AX_ERR_MEM);
  EXPECT_EQ(eval_error(Asm().c16(0x1002).op(ref32).op(end)), AX_ERR_MEM); // crosses the end
  EXPECT_EQ(eval_error(Asm().c64(M1).op(ref64).op(end)), AX_ERR_MEM);
  // No read_mem callback at all: also an error, not a crash.
  Asm a;
  a.c16(0x1000).op(ref8).op(end);
  ax_verify_ctx ctx = t.vctx();
  ax_verified v{};
  ASSERT_EQ(ax_verify(a.code.data(), uint32_t(a.code.size()), &ctx, &v, nullptr), AX_OK);
  ax_env env{};
  uint64_t r = 0;
  EXPECT_EQ(ax_eval(a.code.data(), &v, &env, &r), AX_ERR_MEM);
}

TEST_F(AxEval, Registers) {
  t.regs[GT_RSP] = 0x7ffe0000;
  t.regs[GT_EFLAGS] = 0x246;
  t.regs[GT_RIP] = 0x401000;
  EXPECT_EQ(value(Asm().op2(reg, GT_RSP).c8(8).op(add).op(end)), 0x7ffe0008u);
  EXPECT_EQ(value(Asm().op2(reg, GT_EFLAGS).op(end)), 0x246u);
  EXPECT_EQ(value(Asm().op2(reg, GT_RIP).op(end)), 0x401000u);
  // The callback can refuse a register (xmm0 is 16 bytes): error, no value.
  EXPECT_EQ(eval_error(Asm().op2(reg, GT_XMM0).op(end)), AX_ERR_REG_UNAVAILABLE);
}

TEST_F(AxEval, TraceOps) {
  // trace: addr size =>
  AxRun r = run_ax(t, Asm().c16(0x1000).c8(16).op(trace).c8(5).op(end).code);
  ASSERT_EQ(r.eval, AX_OK);
  EXPECT_EQ(r.result, 5u);
  ASSERT_EQ(t.collected.size(), 1u);
  EXPECT_EQ(t.collected[0].addr, 0x1000u);
  EXPECT_EQ(t.collected[0].len, 16u);
  EXPECT_EQ(t.collected[0].nz, 0);
  // trace_quick n: addr => addr
  t.collected.clear();
  EXPECT_EQ(value(Asm().c16(0x2000).op1(trace_quick, 8).op(end)), 0x2000u);
  ASSERT_EQ(t.collected.size(), 1u);
  EXPECT_EQ(t.collected[0].len, 8u);
  // trace16 n: like trace_quick with a 16-bit size
  t.collected.clear();
  EXPECT_EQ(value(Asm().c16(0x3000).op2(trace16, 0x1234).op(end)), 0x3000u);
  ASSERT_EQ(t.collected.size(), 1u);
  EXPECT_EQ(t.collected[0].len, 0x1234u);
  // tracenz: addr size =>, stops at NUL
  t.collected.clear();
  EXPECT_EQ(value(Asm().c8(9).c16(0x4000).c8(100).op(tracenz).op(end)), 9u);
  ASSERT_EQ(t.collected.size(), 1u);
  EXPECT_EQ(t.collected[0].addr, 0x4000u);
  EXPECT_EQ(t.collected[0].len, 100u);
  EXPECT_EQ(t.collected[0].nz, 1);
  // A failing collection aborts the program.
  t.trace_result = AX_ERR_TRACE;
  EXPECT_EQ(eval_error(Asm().c16(0x1000).c8(4).op(trace).op(end)), AX_ERR_TRACE);
  // Sizes beyond 32 bits are refused rather than truncated.
  t.trace_result = 0;
  EXPECT_EQ(eval_error(Asm().c16(0x1000).c64(1ull << 32).op(trace).op(end)), AX_ERR_TRACE);
  // ... but tracenz's size is a limit (gdb sends -1 for `collect/s` with
  // `set print elements unlimited`): clamped.
  t.collected.clear();
  EXPECT_EQ(eval_error(Asm().c16(0x1000).c8(0xff).op1(ext, 8).op(tracenz).op(end)), AX_OK);
  ASSERT_EQ(t.collected.size(), 1u);
  EXPECT_EQ(t.collected[0].len, 0xffffffffu);
  EXPECT_EQ(t.collected[0].nz, 1);
}

TEST_F(AxEval, TraceStateVariables) {
  t.tsv[1] = 41;
  t.tsv[2] = -1;
  // getv 1; const8 1; add; setv 1 => leaves 42 on the stack and stores it.
  EXPECT_EQ(value(Asm().op2(getv, 1).c8(1).op(add).op2(setv, 1).op(end)), 42u);
  EXPECT_EQ(t.tsv[1], 42);
  EXPECT_EQ(value(Asm().op2(getv, 2).op(end)), M1);
  // tracev leaves the stack alone.
  EXPECT_EQ(value(Asm().c8(3).op2(tracev, 2).op(end)), 3u);
  ASSERT_EQ(t.traced_tsv.size(), 1u);
  EXPECT_EQ(t.traced_tsv[0], 2u);
}

TEST_F(AxEval, PrintfArgumentOrder) {
  // gdb pushes the arguments last-first, then channel and function (see
  // gen_printf in gdb/ax-gdb.c); the callback sees them first-first.
  t.map_str(0x5000, "world");
  Asm a;
  a.c16(0x5000).c8(42).c8(0).c8(0).printf("n=%d s=%s\\n", 2).op(end);
  AxRun r = run_ax(t, a.code);
  ASSERT_EQ(r.verify, AX_OK) << ax_strerror(r.verify);
  ASSERT_EQ(r.eval, AX_OK) << ax_strerror(r.eval);
  EXPECT_TRUE(r.info.uses_printf);
  EXPECT_TRUE(r.info.uses_mem);
  ASSERT_EQ(t.printed.size(), 1u);
  EXPECT_EQ(t.printed[0], "n=42 s=world\n");
  EXPECT_EQ(r.result, 0u); // printf consumed everything
}

TEST_F(AxEval, PrintfWithoutCallbackIsAnError) {
  Asm a;
  a.c8(0).c8(0).printf("hi", 0).op(end);
  ax_verify_ctx ctx = t.vctx();
  ax_verified v{};
  ASSERT_EQ(ax_verify(a.code.data(), uint32_t(a.code.size()), &ctx, &v, nullptr), AX_OK);
  ax_env env{};
  EXPECT_EQ(ax_eval(a.code.data(), &v, &env, nullptr), AX_ERR_NOT_ALLOWED);
}

TEST_F(AxEval, PrintfStringUnreadable) {
  Asm a;
  a.c16(0x9000).c8(0).c8(0).printf("%s", 1).op(end);
  EXPECT_EQ(eval_error(a), AX_ERR_MEM);
}

TEST_F(AxEval, BadArguments) {
  uint8_t code[] = {end};
  ax_verified v{};
  v.code_len = 1;
  ax_env env{};
  EXPECT_EQ(ax_eval(nullptr, &v, &env, nullptr), AX_ERR_BAD_ARG);
  EXPECT_EQ(ax_eval(code, nullptr, &env, nullptr), AX_ERR_BAD_ARG);
  EXPECT_EQ(ax_eval(code, &v, nullptr, nullptr), AX_ERR_BAD_ARG);
  v.code_len = AX_MAX_CODE_LEN + 1;
  EXPECT_EQ(ax_eval(code, &v, &env, nullptr), AX_ERR_BAD_ARG);
}

TEST_F(AxEval, ForgedVerifiedStillSafe) {
  // ax_eval keeps its own bounds checks even if handed unverified code.
  ax_env env = t.env();
  ax_verified v{};
  uint64_t r;
  uint8_t underflow[] = {add, end};
  v.code_len = sizeof underflow;
  EXPECT_EQ(ax_eval(underflow, &v, &env, &r), AX_ERR_STACK_UNDERFLOW);
  uint8_t truncated[] = {const64, 1, 2};
  v.code_len = sizeof truncated;
  EXPECT_EQ(ax_eval(truncated, &v, &env, &r), AX_ERR_TRUNCATED);
  uint8_t off_end[] = {const8, 1};
  v.code_len = sizeof off_end;
  EXPECT_EQ(ax_eval(off_end, &v, &env, &r), AX_ERR_NO_END);
  uint8_t bad_jump[] = {goto_, 0x10, 0x00, end};
  v.code_len = sizeof bad_jump;
  EXPECT_EQ(ax_eval(bad_jump, &v, &env, &r), AX_ERR_BAD_JUMP);
  uint8_t overflow[] = {const8, 1, dup_, goto_, 0, 2};
  v.code_len = sizeof overflow;
  env.step_budget = 1000;
  EXPECT_EQ(ax_eval(overflow, &v, &env, &r), AX_ERR_STACK_OVERFLOW);
  uint8_t fl[] = {const8, 1, ref_double, end};
  v.code_len = sizeof fl;
  EXPECT_EQ(ax_eval(fl, &v, &env, &r), AX_ERR_FLOAT_OP);
}

} // namespace

namespace {

// Missing or failing callbacks end the evaluation with an error.
TEST(AxEvalCallbacks, MissingCallbacks) {
  FakeTarget t;
  t.tsv[1] = 0;
  struct Case {
    Asm code;
    int expect;
  } cases[] = {
      {Asm().op2(reg, 0).op(end), AX_ERR_REG_UNAVAILABLE},
      {Asm().op2(getv, 1).op(end), AX_ERR_BAD_TSV},
      {Asm().c8(1).op2(setv, 1).op(end), AX_ERR_BAD_TSV},
      {Asm().op2(tracev, 1).op(end), AX_ERR_TRACE},
      {Asm().c8(1).c8(1).op(trace).op(end), AX_ERR_TRACE},
      {Asm().c8(1).op1(trace_quick, 1).op(end), AX_ERR_TRACE},
      {Asm().c8(1).c8(1).op(ref8).op(end), AX_ERR_MEM},
  };
  for (auto& c : cases) {
    ax_verify_ctx ctx = t.vctx();
    ax_verified v{};
    ASSERT_EQ(ax_verify(c.code.code.data(), uint32_t(c.code.code.size()), &ctx, &v, nullptr),
              AX_OK);
    ax_env env{};
    uint64_t r = 0;
    EXPECT_EQ(ax_eval(c.code.code.data(), &v, &env, &r), c.expect);
  }
}

struct Failing {
  static int positive(void*, uint32_t, uint64_t*) { return 1; } // not a valid status
  static int get_fails(void*, uint32_t, int64_t*) { return AX_ERR_BAD_TSV; }
  static int mem_custom(void*, uint64_t, void*, uint32_t) { return AX_ERR_TRACE; }
};

TEST(AxEvalCallbacks, FailingCallbacksPropagate) {
  FakeTarget t;
  t.tsv[1] = 0;
  ax_verify_ctx ctx = t.vctx();
  ax_env env = t.env();
  ax_verified v{};
  uint64_t r = 0;
  // A positive return is still a failure, reported as the opcode's own error.
  Asm a;
  a.op2(reg, 0).op(end);
  ASSERT_EQ(ax_verify(a.code.data(), uint32_t(a.code.size()), &ctx, &v, nullptr), AX_OK);
  env.read_reg = Failing::positive;
  EXPECT_EQ(ax_eval(a.code.data(), &v, &env, &r), AX_ERR_REG_UNAVAILABLE);
  // A negative return is passed through unchanged.
  Asm b;
  b.op2(getv, 1).op(end);
  ASSERT_EQ(ax_verify(b.code.data(), uint32_t(b.code.size()), &ctx, &v, nullptr), AX_OK);
  env.get_tsv = Failing::get_fails;
  EXPECT_EQ(ax_eval(b.code.data(), &v, &env, &r), AX_ERR_BAD_TSV);
  Asm c;
  c.c8(0).op(ref8).op(end);
  ASSERT_EQ(ax_verify(c.code.data(), uint32_t(c.code.size()), &ctx, &v, nullptr), AX_OK);
  env.read_mem = Failing::mem_custom;
  EXPECT_EQ(ax_eval(c.code.data(), &v, &env, &r), AX_ERR_TRACE);
}

TEST(AxEvalCallbacks, ForgedPrintfFormatIsRefused) {
  // Unverified printf whose "string" is not NUL-terminated: the callback is
  // never handed an unterminated format.
  FakeTarget t;
  ax_env env = t.env();
  uint8_t code[] = {const8, 0, const8, 0, printf_, 0, 0, 2, 'h', 'i', end};
  ax_verified v{};
  v.code_len = sizeof code;
  EXPECT_EQ(ax_eval(code, &v, &env, nullptr), AX_ERR_BAD_PRINTF);
  EXPECT_TRUE(t.printed.empty());
}

} // namespace
