// Translation checks that need no kernel: what the generator refuses (so the
// engine falls back to ptrace) and how large a frame it reserves.
#include <gtest/gtest.h>

#include "bpf/bpf_codegen.h"
#include "bpf/bpf_layout.h"
#include "bpf_test_util.h"

namespace gdbtrace::bpf {
namespace {

using test::ax;

CodegenOptions options() {
  CodegenOptions o;
  o.tsv_index = [](uint32_t n) -> std::optional<uint32_t> { return n % kMaxTsvs; };
  o.timestamp_tsv = 1;
  return o;
}

Tracepoint with_action(TraceAction a) {
  Tracepoint tp;
  tp.number = 3;
  tp.address = 0x401000;
  tp.actions.push_back(std::move(a));
  return tp;
}

std::string refusal(const Tracepoint& tp) {
  auto r = generate_program(tp, CodegenMaps{}, options());
  return r ? std::string() : r.error().message;
}

TEST(BpfCodegen, RefusesWhileStepping) {
  Tracepoint tp = with_action(CollectRegisters{});
  tp.step_count = 3;
  EXPECT_NE(refusal(tp).find("while-stepping"), std::string::npos);
}

TEST(BpfCodegen, RefusesBackwardJumps) {
  // loop: const8 1 ; if_goto 0
  Tracepoint tp = with_action(CollectExpr{ax("const8 1 if_goto 0 end")});
  EXPECT_NE(refusal(tp).find("loops"), std::string::npos) << refusal(tp);
}

TEST(BpfCodegen, RefusesPrintf) {
  // printf with no arguments: nargs 0, fmt length 3 "hi\0", after the function/channel pushes.
  std::vector<uint8_t> code = {0x22, 0, 0x22, 0, 0x34, 0, 0, 3, 'h', 'i', 0, 0x27};
  Tracepoint tp = with_action(CollectExpr{test::verified(code, true)});
  EXPECT_NE(refusal(tp).find("printf"), std::string::npos) << refusal(tp);
  EXPECT_FALSE(check_tracepoint(tp)); // found without generating
}

TEST(BpfCodegen, RefusesBytecodeTheVerifierDidNotSee) {
  AgentExpr e; // no per-pc depths: the static stack layout has nothing to stand on
  e.code = {0x22, 1, 0x27};
  Tracepoint tp = with_action(CollectExpr{e});
  EXPECT_NE(refusal(tp).find("not verified"), std::string::npos) << refusal(tp);
}

// check_tracepoint() sees what the verifier reported; limits that only
// generation meets are left to generate_program.
TEST(BpfCodegen, CheckIsTheCheapSubsetOfGeneration) {
  EXPECT_FALSE(check_tracepoint(with_action(CollectExpr{ax("const8 1 if_goto 0 end")})));
  EXPECT_TRUE(check_tracepoint(with_action(CollectExpr{ax("const8 1 const8 2 add end")})));
  Tracepoint xmm = with_action(CollectExpr{ax("reg 40 end")});
  EXPECT_TRUE(check_tracepoint(xmm));
  EXPECT_FALSE(generate_program(xmm, CodegenMaps{}, options()));
}

TEST(BpfCodegen, RefusesRegistersAUprobeCannotSee) {
  Tracepoint tp = with_action(CollectExpr{ax("reg 40 end")}); // xmm0
  EXPECT_NE(refusal(tp).find("register 40"), std::string::npos) << refusal(tp);
  Tracepoint m = with_action(CollectMemory{24, 0, 4}); // st0 as base register
  EXPECT_NE(refusal(m).find("register 24"), std::string::npos) << refusal(m);
}

TEST(BpfCodegen, RefusesAssigningTheTimestamp) {
  Tracepoint tp = with_action(CollectExpr{ax("const8 1 setv 1 end")});
  EXPECT_NE(refusal(tp).find("trace_timestamp"), std::string::npos);
}

TEST(BpfCodegen, RefusesDeepStacks) {
  std::string text;
  for (int i = 0; i < 70; i++)
    text += "const8 1 ";
  for (int i = 0; i < 69; i++)
    text += "add ";
  text += "end";
  Tracepoint tp = with_action(CollectExpr{ax(text)});
  EXPECT_NE(refusal(tp).find("stack slots"), std::string::npos) << refusal(tp);
}

TEST(BpfCodegen, FrameReservationCoversEveryBlock) {
  Tracepoint tp;
  tp.number = 1;
  tp.actions.push_back(CollectRegisters{});
  tp.actions.push_back(CollectMemory{-1, 0x1000, 100});
  tp.actions.push_back(CollectMemory{-1, 0x1000, 70000}); // split into two 'M' blocks
  tp.actions.push_back(CollectExpr{ax("reg 2 trace_quick 8 const16 300 trace tracev 7 end")});
  auto p = generate_program(tp, CodegenMaps{}, options());
  ASSERT_TRUE(p) << p.error().message;
  // Registers travel compactly (trace/compact_frame.h): a u64 for each of the 16 GPRs,
  // rip, eflags, cs, ss and orig_rax; fs_base needs a task offset options() lacks.
  ASSERT_EQ(p->compact_registers.size(), 21u);
  uint32_t expect = 6 + (1 + 8 * 21) + (11 + 100) + (11 + 65535 + 11 + (70000 - 65535)) + (11 + 8) +
                    (11 + 300) + 13;
  EXPECT_EQ(p->frame_max, expect);
  EXPECT_TRUE(p->registers[GT_RAX]);
  EXPECT_TRUE(p->registers[GT_RIP]);
  EXPECT_TRUE(p->registers[GT_ORIG_RAX]);
  EXPECT_FALSE(p->registers[GT_XMM0]);
  EXPECT_FALSE(p->registers[GT_DS]);
}

TEST(BpfCodegen, DynamicTraceReservesTheCap) {
  Tracepoint tp = with_action(CollectExpr{ax("reg 2 reg 3 trace end")});
  auto p = generate_program(tp, CodegenMaps{}, options());
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->frame_max, 6 + 11 + kDynamicTraceMax);
}

// The refusal the engine shows when it falls back to ptrace names the size
// asked for and the limit (gdb compiles `collect *(char*)$rsi@1000000` to this).
TEST(BpfCodegen, RefusalOfALargeCollectionNamesItsSize) {
  std::string why = refusal(with_action(CollectExpr{ax("reg 4 const32 1000000 trace end")}));
  EXPECT_NE(why.find("collecting 1000000 bytes in one hit (trace): an eBPF frame holds at most " +
                     std::to_string(kMaxFrameSize) + " bytes"),
            std::string::npos)
      << why;
  why = refusal(with_action(CollectExpr{ax("reg 4 const32 100000 tracenz end")}));
  EXPECT_NE(why.find("a string of up to 100000 bytes (tracenz): one memory block holds at most "
                     "65535 bytes"),
            std::string::npos)
      << why;
}

TEST(BpfCodegen, RegisterOffsetsFollowPtRegs) {
  EXPECT_EQ(pt_regs_offset(GT_R15), 0);
  EXPECT_EQ(pt_regs_offset(GT_RAX), 80);
  EXPECT_EQ(pt_regs_offset(GT_RIP), 128);
  EXPECT_EQ(pt_regs_offset(GT_RSP), 152);
  EXPECT_EQ(pt_regs_offset(GT_FS), -1);
  EXPECT_EQ(pt_regs_offset(GT_XMM0), -1);
}

} // namespace

// gdb's `collect $ymm15` sends an 'R' mask of xmm15 and ymm15h: only ptrace can read them, so
// check() refuses (the engine falls back). `collect $regs` (every register) stays in eBPF, with
// the FPU/vector part reported unavailable.
TEST(BpfCodegen, ExplicitVectorRegistersNeedPtrace) {
  CollectRegisters ymm15;
  ymm15.mask.assign(10, 0);
  ymm15.mask[55 / 8] |= 1 << (55 % 8);
  ymm15.mask[75 / 8] |= 1 << (75 % 8);
  auto r = check_tracepoint(with_action(ymm15));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("ptrace"), std::string::npos) << r.error().message;
  CollectRegisters all;
  all.mask.assign(10, 0xff);
  EXPECT_TRUE(check_tracepoint(with_action(all)));
  CollectRegisters rip_rsp;
  rip_rsp.mask.assign(10, 0);
  rip_rsp.mask[0] = 1 << 7; // rsp
  rip_rsp.mask[2] = 1 << 0; // rip
  EXPECT_TRUE(check_tracepoint(with_action(rip_rsp)));
}

} // namespace gdbtrace::bpf
