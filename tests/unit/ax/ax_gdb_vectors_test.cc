// Bytecode emitted by the real gdb 13.1 (/usr/bin/gdb) for a small program,
// captured with `set debug remote 1` against /usr/bin/gdbserver (the QTDP
// packets' X<len>,<hex> parts) and `maint agent-eval` / `maint agent-printf`
// disassemblies. The program (built -O0 -g, stopped in f(x=5, y=2)):
//
//   struct pt { int x; short s; unsigned char c; long l; };
//   int gx = 5; long gl = -7; char gname[] = "hello"; char *gp = gname;
//   struct pt gpt = {1, -2, 3, 4}; ...
//   int f(int x, int y) { long z = x * 3; return x + y + (int)z; }
//
// Addresses (PIE, under gdb): gx 0x555555558010, gl 0x555555558018,
// gpt 0x555555558030, gp 0x555555558048; locals are at rbp+16-36 (x) and
// rbp+16-40 (y) (gdb addresses frame locals from the DWARF frame base).
#include <gtest/gtest.h>

#include "ax_test_util.h"

using namespace axtest;

namespace {

constexpr uint64_t kGx = 0x555555558010, kGl = 0x555555558018, kGpt = 0x555555558030,
                   kGp = 0x555555558048, kGname = 0x555555558020, kRbp = 0x7fffffffe000;

class GdbVectors : public ::testing::Test {
protected:
  FakeTarget t;
  void SetUp() override {
    t.regs[GT_RBP] = kRbp;
    std::vector<uint8_t> frame(64, 0);
    auto put32 = [&](size_t off, uint32_t v) {
      for (int i = 0; i < 4; i++)
        frame[off + i] = uint8_t(v >> (8 * i));
    };
    // frame base = rbp + 16; x at base-36 = rbp-20, y at base-40 = rbp-24
    put32(64 - 20, 5);
    put32(64 - 24, 2);
    t.map(kRbp - 64, frame);
    t.map(kGx, {5, 0, 0, 0, 0, 0, 0, 0});
    t.map_u64(kGl, uint64_t(-7));
    t.map_str(kGname, "hello");
    t.map(kGpt, {1, 0, 0, 0, 0xfe, 0xff, 3, 0, 4, 0, 0, 0, 0, 0, 0, 0});
    t.map_u64(kGp, kGname);
  }
};

// `trace f if x + y*2 > 3` -> QTDP:2:...:E:0:0:X29,<this>
TEST_F(GdbVectors, ConditionOnLocals) {
  auto code = from_hex(
      "26000622100222dc16080219162026000622100222d8160802191620220204162002162022032b1427");
  ASSERT_EQ(code.size(), 0x29u);
  AxRun r = run_ax(t, code, /*allow_trace=*/false); // a condition: no trace ops
  ASSERT_EQ(r.verify, AX_OK) << ax_strerror(r.verify) << " at " << r.err_pc;
  EXPECT_EQ(r.info.max_stack, 3u);
  EXPECT_TRUE(r.info.uses_regs);
  ASSERT_EQ(r.eval, AX_OK) << ax_strerror(r.eval);
  EXPECT_EQ(r.result, 1u); // 5 + 2*2 = 9 > 3
}

// `trace prog.c:5 if gx == 5 && gl < 0` -> QTDP:3:...:X32,<this>
TEST_F(GdbVectors, ConditionWithShortCircuitJumps) {
  auto code = from_hex("25000055555555801019162022051320001521002f2500005555555580181a1640220014200"
                       "02a21002f2201210031220027");
  ASSERT_EQ(code.size(), 0x32u);
  AxRun r = run_ax(t, code, false);
  ASSERT_EQ(r.verify, AX_OK) << ax_strerror(r.verify) << " at " << r.err_pc;
  EXPECT_FALSE(r.info.has_backward_jump);
  ASSERT_EQ(r.eval, AX_OK);
  EXPECT_EQ(r.result, 1u);
  t.map_u64(kGl, 7); // gl >= 0: false
  r = run_ax(t, code, false);
  ASSERT_EQ(r.eval, AX_OK);
  EXPECT_EQ(r.result, 0u);
  t.map(kGx, {4, 0, 0, 0}); // gx != 5: false via the first goto
  r = run_ax(t, code, false);
  ASSERT_EQ(r.eval, AX_OK);
  EXPECT_EQ(r.result, 0u);
}

// `collect x, gpt.s, *gp@4` -> QTDP:-2:...:M...X0F,<a>X10,<b>X10,<c>
TEST_F(GdbVectors, CollectActions) {
  auto x = from_hex("26000622100222dc16080222040c27");
  AxRun r = run_ax(t, x);
  ASSERT_EQ(r.verify, AX_OK);
  ASSERT_EQ(r.eval, AX_OK);
  auto gpt_s = from_hex("25000055555555803022040222020c27");
  r = run_ax(t, gpt_s);
  ASSERT_EQ(r.eval, AX_OK);
  auto gp4 = from_hex("2500005555555580480d081a22040c27");
  r = run_ax(t, gp4);
  ASSERT_EQ(r.eval, AX_OK);
  ASSERT_EQ(t.collected.size(), 4u);
  EXPECT_EQ(t.collected[0].addr, kRbp - 20); // x
  EXPECT_EQ(t.collected[0].len, 4u);
  EXPECT_EQ(t.collected[1].addr, kGpt + 4); // gpt.s
  EXPECT_EQ(t.collected[1].len, 2u);
  EXPECT_EQ(t.collected[2].addr, kGp); // the pointer itself (trace_quick 8)
  EXPECT_EQ(t.collected[2].len, 8u);
  EXPECT_EQ(t.collected[3].addr, kGname); // *gp@4
  EXPECT_EQ(t.collected[3].len, 4u);
  // The same programs are refused as conditions.
  EXPECT_EQ(run_ax(t, x, false).verify, AX_ERR_NOT_ALLOWED);
}

// `teval $cnt = $cnt + 1` and `collect $cnt` (QTDV:2 is $cnt) -> X0C / X08
TEST_F(GdbVectors, TraceStateVariables) {
  t.tsv[2] = 41;
  AxRun r = run_ax(t, from_hex("2c000222010216402d000227"));
  ASSERT_EQ(r.verify, AX_OK);
  ASSERT_EQ(r.eval, AX_OK);
  EXPECT_EQ(t.tsv[2], 42);
  r = run_ax(t, from_hex("2c00022e00022927")); // getv 2; tracev 2; pop; end
  ASSERT_EQ(r.verify, AX_OK) << ax_strerror(r.verify);
  ASSERT_EQ(r.eval, AX_OK);
  ASSERT_EQ(t.traced_tsv.size(), 1u);
  EXPECT_EQ(t.traced_tsv[0], 2u);
  t.tsv.erase(2);
  EXPECT_EQ(run_ax(t, from_hex("2c00022e00022927")).verify, AX_ERR_BAD_TSV);
}

// `maint agent-eval gx / 3 - gl % 4` (disassembly rebuilt byte for byte):
//   const64 gx; ref32; ext 32; const8 3; div_signed; ext 32; const64 gl;
//   ref64; ext 64; const8 4; rem_signed; ext 64; sub; ext 64; end
TEST_F(GdbVectors, SignedDivisionAndRemainder) {
  Asm a;
  a.c64(kGx)
      .op(ref32)
      .op1(ext, 32)
      .c8(3)
      .op(div_signed)
      .op1(ext, 32)
      .c64(kGl)
      .op(ref64)
      .op1(ext, 64)
      .c8(4)
      .op(rem_signed)
      .op1(ext, 64)
      .op(sub)
      .op1(ext, 64)
      .op(end);
  AxRun r = run_ax(t, a.code, false);
  ASSERT_EQ(r.eval, AX_OK);
  EXPECT_EQ(int64_t(r.result), 5 / 3 - (-7 % 4)); // 1 - (-3) = 4
}

// `maint agent-eval gpt.s`: const64 gpt; const8 4; add; ref16; ext 16; end
// `maint agent-eval -gl`: const8 0; const64 gl; ref64; ext 64; sub; ext 64; end
// `maint agent-eval gx ? 100 : 200`:
//   const64 gx; ref32; ext 32; log_not; if_goto 21; const8 100; goto 24; const16 200; end
TEST_F(GdbVectors, MoreExpressions) {
  Asm s;
  s.c64(kGpt).c8(4).op(add).op(ref16).op1(ext, 16).op(end);
  EXPECT_EQ(int64_t(run_ax(t, s.code, false).result), -2);
  Asm neg;
  neg.c8(0).c64(kGl).op(ref64).op1(ext, 64).op(sub).op1(ext, 64).op(end);
  EXPECT_EQ(int64_t(run_ax(t, neg.code, false).result), 7);
  Asm cond;
  cond.c64(kGx)
      .op(ref32)
      .op1(ext, 32)
      .op(log_not)
      .op2(if_goto, 21)
      .c8(100)
      .op2(goto_, 24)
      .c16(200)
      .op(end);
  ASSERT_EQ(cond.code.size(), 25u);
  EXPECT_EQ(run_ax(t, cond.code, false).result, 100u);
  t.map(kGx, {0, 0, 0, 0});
  EXPECT_EQ(run_ax(t, cond.code, false).result, 200u);
}

// `maint agent-eval $rsp + 8`: reg 7; zero_ext 64; const8 8; add; zero_ext 64; end
TEST_F(GdbVectors, RegisterExpression) {
  t.regs[GT_RSP] = 0x7fffffffd000;
  Asm a;
  a.op2(reg, 7).op1(zero_ext, 64).c8(8).op(add).op1(zero_ext, 64).op(end);
  EXPECT_EQ(run_ax(t, a.code, false).result, 0x7fffffffd008u);
}

// `maint agent-printf "x=%d s=%s\n", gx, gp`:
//   const64 gp; ref64; const64 gx; ref32; ext 32; const8 0; const8 0;
//   printf "x=%d s=%s\n", 2 args; end
// (the format travels raw: backslash-n is two characters, gdbserver's
// format_pieces turns it into a newline)
TEST_F(GdbVectors, AgentPrintf) {
  Asm a;
  a.c64(kGp)
      .op(ref64)
      .c64(kGx)
      .op(ref32)
      .op1(ext, 32)
      .c8(0)
      .c8(0)
      .printf("x=%d s=%s\\n", 2)
      .op(end);
  ASSERT_EQ(a.code.size(), 43u); // the disassembly's `end` is at 42
  AxRun r = run_ax(t, a.code, false);
  ASSERT_EQ(r.verify, AX_OK) << ax_strerror(r.verify);
  ASSERT_EQ(r.eval, AX_OK) << ax_strerror(r.eval);
  ASSERT_EQ(t.printed.size(), 1u);
  EXPECT_EQ(t.printed[0], "x=5 s=hello\n");
}

} // namespace

namespace {

// Second program (gdb 13.1 + /usr/bin/gdbserver, `set debug remote 1`):
//   struct bf { unsigned a : 3; int b : 5; unsigned long c : 40; };
//   struct bf gbf = {5, -3, 0x123456789aULL};     // at 0x555555558010
//   int garr[4] = {10, 20, 30, 40};                // at 0x555555558020
//   int idx = 2;                                   // at 0x555555558030
//   char *gs = "traced string";                    // at 0x555555558038 -> 0x555555556004
// Memory contents below are what `x/8xb` showed in the live process.
class GdbVectors2 : public ::testing::Test {
protected:
  FakeTarget t;
  void SetUp() override {
    t.map(0x555555558010, {0xed, 0x9a, 0x78, 0x56, 0x34, 0x12, 0x00, 0x00});
    t.map(0x555555558020, {10, 0, 0, 0, 20, 0, 0, 0, 30, 0, 0, 0, 40, 0, 0, 0});
    t.map(0x555555558030, {2, 0, 0, 0, 0, 0, 0, 0});
    t.map_u64(0x555555558038, 0x555555556004);
    t.map_str(0x555555556004, "traced string");
  }
};

// `trace main if gbf.b < 0 && gbf.c == 0x123456789a` -> X4b: bitfields are
// fetched with ref8/ref64, shifted (rsh_unsigned, lsh) and narrowed (ext 5,
// zero_ext 40), with dup/swap and short-circuit jumps.
TEST_F(GdbVectors2, BitfieldCondition) {
  auto code =
      from_hex("2500005555555580101722030b160522001420001821004825000055555555801028220102192b"
               "22050217222009102a2825000000123456789a2a4013200043210048220121004a220027");
  ASSERT_EQ(code.size(), 0x4bu);
  AxRun r = run_ax(t, code, false);
  ASSERT_EQ(r.verify, AX_OK) << ax_strerror(r.verify) << " at " << r.err_pc;
  ASSERT_EQ(r.eval, AX_OK) << ax_strerror(r.eval);
  EXPECT_EQ(r.result, 1u);
  t.map(0x555555558010, {0x2d, 0x9a, 0x78, 0x56, 0x34, 0x12, 0x00, 0x00}); // b = 5: false
  r = run_ax(t, code, false);
  ASSERT_EQ(r.eval, AX_OK);
  EXPECT_EQ(r.result, 0u);
  t.map(0x555555558010, {0xed, 0x9b, 0x78, 0x56, 0x34, 0x12, 0x00, 0x00}); // c differs: false
  r = run_ax(t, code, false);
  ASSERT_EQ(r.eval, AX_OK);
  EXPECT_EQ(r.result, 0u);
}

// `collect garr[idx]` -> X21 (index scaled by 4, trace 4 bytes)
TEST_F(GdbVectors2, CollectArrayElement) {
  AxRun r =
      run_ax(t, from_hex("2500005555555580202500005555555580300d04191620220404022a4022040c27"));
  ASSERT_EQ(r.verify, AX_OK) << ax_strerror(r.verify) << " at " << r.err_pc;
  ASSERT_EQ(r.eval, AX_OK) << ax_strerror(r.eval);
  ASSERT_EQ(t.collected.size(), 2u);
  EXPECT_EQ(t.collected[0].addr, 0x555555558030u); // idx itself (trace_quick 4)
  EXPECT_EQ(t.collected[0].len, 4u);
  EXPECT_EQ(t.collected[1].addr, 0x555555558020u + 8); // garr[2]
  EXPECT_EQ(t.collected[1].len, 4u);
}

// `collect/s gs + 0` -> X17: the limit is const8 0xff; ext 8, i.e. -1 (no
// limit), and `collect/s10 gs + 0` -> X15 with limit 10. Both end in tracenz.
TEST_F(GdbVectors2, CollectString) {
  AxRun r = run_ax(t, from_hex("2500005555555580380d081a2200022a4022ff16082f27"));
  ASSERT_EQ(r.verify, AX_OK);
  ASSERT_EQ(r.eval, AX_OK) << ax_strerror(r.eval);
  r = run_ax(t, from_hex("2500005555555580380d081a2200022a40220a2f27"));
  ASSERT_EQ(r.eval, AX_OK) << ax_strerror(r.eval);
  ASSERT_EQ(t.collected.size(), 4u);
  EXPECT_EQ(t.collected[0].addr, 0x555555558038u); // the pointer (trace_quick 8)
  EXPECT_EQ(t.collected[1].addr, 0x555555556004u); // the string
  EXPECT_EQ(t.collected[1].nz, 1);
  EXPECT_EQ(t.collected[1].len, 0xffffffffu); // -1 clamped
  EXPECT_EQ(t.collected[3].addr, 0x555555556004u);
  EXPECT_EQ(t.collected[3].len, 10u);
  EXPECT_EQ(t.collected[3].nz, 1);
}

} // namespace
