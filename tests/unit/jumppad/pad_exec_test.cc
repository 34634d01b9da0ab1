// Emitted pads run in this process: a small function of our own is the site
// (its first instruction a rip-relative load), patched with the 5-byte jmp;
// calling it must return what it returned before, and the rings, counters and
// TSVs must say what the hits were.
#include <gtest/gtest.h>

#include <atomic>
#include <cpuid.h>
#include <cstring>
#include <sched.h>
#include <sys/mman.h>
#include <thread>

#include "../strict_skip.h"
#include "abi/amd64_regs.h"
#include "abi/ax_opcodes.h"
#include "ax/ax.h"
#include "jumppad/jumppad_area.h"
#include "jumppad/jumppad_site.h"
#include "pad_fixture.h"
#include "trace/tracepoint_parser.h"

namespace gdbtrace::jumppad {
namespace {

class PadExec : public PadFixture {
protected:
  // BYTES written at the site's function + AT (the function's first 64 bytes start as int3s).
  void put(size_t at, std::initializer_list<uint8_t> bytes) {
    if (!cleared_)
      std::memset(site_, 0xcc, 64);
    cleared_ = true;
    std::memcpy(site_ + at, bytes.begin(), bytes.size());
  }
  bool cleared_ = false;
  // Every record's rip is AT; returns how many there were.
  size_t records_at(const uint8_t* at) {
    auto records = take_records(base_ + kRingOffset, slots_, tails_);
    for (const Record& r : records)
      EXPECT_EQ(r.regs[17], uint64_t(at));
    return records.size();
  }
};

TEST_F(PadExec, HitsRecordRegistersAndRunTheRelocatedInstruction) {
  slot(0).enabled = 1;
  slot(1).enabled = 0; // a disabled tracepoint at the same site
  patch({PadTracepoint{0, {{0, 5}}, true}, PadTracepoint{1, {{1, 7}}, true}});
  ASSERT_EQ(site_[0], 0xe9);
  for (long i = 0; i < 10; ++i)
    ASSERT_EQ(call(i * 1000), i * 1000 + 100); // the rip-relative load still reads +16
  EXPECT_EQ(slot(0).hits, 0u); // a recording pad's hits are its records + drops (the stub counts)
  EXPECT_EQ(slot(1).hits, 0u);
  EXPECT_EQ(tsv(0), 0); // and so are its TSV adds: k per record or drop
  EXPECT_EQ(tsv(1), 0);
  auto records = take_records(base_ + kRingOffset, slots_, tails_);
  ASSERT_EQ(records.size(), 10u);
  std::stable_sort(records.begin(), records.end(),
                   [](const Record& a, const Record& b) { return a.stamp < b.stamp; });
  int local = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    const Record& r = records[i];
    EXPECT_EQ(r.tp_slot, 0u);
    EXPECT_EQ(r.regs[9], uint64_t(i * 1000)) << "rdi of hit " << i; // Record::regs order
    EXPECT_EQ(r.regs[17], uint64_t(site_));                         // rip: the site
    uint64_t rsp = r.regs[16];
    EXPECT_LT(rsp, uint64_t(&local) + 4096); // the caller's stack, below its frame
    EXPECT_GT(rsp, uint64_t(&local) - 65536);
    EXPECT_EQ(rsp % 16, 8u); // at a function's first instruction: after the call's push
  }
  EXPECT_TRUE(take_records(base_ + kRingOffset, slots_, tails_).empty());
}

// The same with rdtsc + rdpid choosing the ring, where the CPU has rdpid.
TEST_F(PadExec, RdpidFormRecordsToo) {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(c & (1u << 22)))
    GDBTRACE_SKIP("no-rdpid") << "no rdpid on this CPU (the pads use rdtscp there)";
  rdpid_ = true;
  slot(0).enabled = 1;
  patch({PadTracepoint{0, {{0, 2}}, true}});
  for (long i = 0; i < 20; ++i)
    ASSERT_EQ(call(i), i + 100);
  auto records = take_records(base_ + kRingOffset, slots_, tails_);
  EXPECT_EQ(records.size() + slot(0).drops, 20u);
  EXPECT_GE(records.size(), 16u);
  EXPECT_EQ(tsv(0), 0); // the stub adds them
  for (const Record& r : records)
    EXPECT_EQ(r.regs[17], uint64_t(site_));
}

TEST_F(PadExec, APadWritingNoRecordsCountsItsHits) {
  slot(0).enabled = 1;
  patch({PadTracepoint{0, {{0, 5}}, false}});
  for (long i = 0; i < 10; ++i)
    ASSERT_EQ(call(i), i + 100);
  EXPECT_EQ(slot(0).hits, 10u);
  EXPECT_EQ(tsv(0), 50);
  EXPECT_TRUE(take_records(base_ + kRingOffset, slots_, tails_).empty());
}

TEST_F(PadExec, UnarmedPadOnlyRunsTheInstruction) {
  // A fork child's armed word reads 0 (MADV_WIPEONFORK): it must count and record nothing.
  slot(0).enabled = 1;
  armed_ref() = 0;
  patch({PadTracepoint{0, {{0, 5}}, true}});
  for (long i = 0; i < 5; ++i)
    ASSERT_EQ(call(i), i + 100);
  EXPECT_EQ(slot(0).hits, 0u);
  EXPECT_EQ(tsv(0), 0);
  EXPECT_TRUE(take_records(base_ + kRingOffset, slots_, tails_).empty());
}

TEST_F(PadExec, AFullRingDropsAndCounts) {
  slot(0).enabled = 1;
  patch({PadTracepoint{0, {}, true}});
  for (long i = 0; i < 100; ++i)
    ASSERT_EQ(call(i), i + 100);
  auto records = take_records(base_ + kRingOffset, slots_, tails_);
  EXPECT_GT(slot(0).drops, 0u);
  EXPECT_EQ(records.size() + slot(0).drops, 100u);
  // Freed slots take records again.
  call(1);
  EXPECT_EQ(take_records(base_ + kRingOffset, slots_, tails_).size(), 1u);
}

// Branches at the site, run from the pad: each function's result says the
// branch went where the original goes (and, for calls, came back after the site).
TEST_F(PadExec, ACallSiteCallsAndReturnsAfterTheSite) {
  slot(0).enabled = 1;
  put(0, {0xe8, 0x1b, 0, 0, 0});                             // call +32
  put(5, {0x48, 0x83, 0xc0, 0x01, 0xc3});                    // add $1,%rax; ret
  put(32, {0x48, 0x8b, 0x04, 0x24, 0x48, 0x01, 0xf8, 0xc3}); // mov (%rsp),%rax; add %rdi,%rax; ret
  patch({PadTracepoint{0, {}, true}});
  for (long i = 0; i < 8; ++i)
    ASSERT_EQ(call(i), long(site_) + 5 + i + 1); // returned to site+5, not into the pad
  EXPECT_EQ(records_at(site_), 8u);
}

TEST_F(PadExec, AJccSiteTakesBothWaysWithTheProgramsFlags) {
  slot(0).enabled = 1;
  put(0, {0x48, 0x85, 0xff});                       // test %rdi,%rdi
  put(3, {0x0f, 0x84, 0x0b, 0, 0, 0});              // je +20
  put(9, {0x48, 0xc7, 0xc0, 0x07, 0, 0, 0, 0xc3});  // mov $7,%rax; ret
  put(20, {0x48, 0xc7, 0xc0, 0x09, 0, 0, 0, 0xc3}); // mov $9,%rax; ret
  patch({PadTracepoint{0, {}, true}}, site_ + 3);
  for (long i = 0; i < 6; ++i)
    ASSERT_EQ(call(i % 2), i % 2 ? 7 : 9); // the flags of `test` survive the pad
  EXPECT_EQ(records_at(site_ + 3), 6u);
}

// Every arithmetic flag and DF, in each combination, is what the program had
// at the site after the pad ran, whether the pad puts them back with popfq or
// with sahf (and OF by hand).
TEST_F(PadExec, FlagsSurviveThePad) {
  constexpr uint64_t kCF = 1, kPF = 4, kAF = 0x10, kZF = 0x40, kSF = 0x80, kDF = 0x400, kOF = 0x800;
  const uint64_t bits[] = {kCF, kPF, kAF, kZF, kSF, kDF, kOF};
  put(0, {0x57, 0x9d});             // push %rdi; popfq        the flags asked for
  put(2, {0xb9, 0x2a, 0, 0, 0});    // mov $42,%ecx            the site
  put(7, {0x9c, 0x58, 0xfc, 0xc3}); // pushfq; pop %rax; cld; ret
  for (bool sahf : {false, true}) {
    sahf_ = sahf;
    slot(0).enabled = 1;
    patch({PadTracepoint{0, {}, true}}, site_ + 2);
    for (uint64_t combo = 0; combo < 128; ++combo) {
      uint64_t want = 0x202; // IF and the always-one bit
      for (size_t b = 0; b < 7; ++b)
        if (combo >> b & 1)
          want |= bits[b];
      uint64_t mask = kCF | kPF | kAF | kZF | kSF | kDF | kOF;
      ASSERT_EQ(uint64_t(call(long(want))) & mask, want & mask)
          << (sahf ? "sahf" : "popfq") << " flags " << std::hex << want;
      take(); // keep the ring from filling
    }
    std::memcpy(site_ + 2, "\xb9\x2a\x00\x00\x00", 5); // the site back, for the next patch
  }
}

TEST_F(PadExec, AJmpSiteJumps) {
  slot(0).enabled = 1;
  put(0, {0xe9, 0x0b, 0, 0, 0, 0x0f, 0x0b}); // jmp +16; ud2
  put(16, {0x48, 0x8d, 0x47, 0x05, 0xc3});   // lea 5(%rdi),%rax; ret
  patch({PadTracepoint{0, {}, true}});
  for (long i = 0; i < 4; ++i)
    ASSERT_EQ(call(i), i + 5);
  EXPECT_EQ(records_at(site_), 4u);
}

TEST_F(PadExec, AnIndirectCallReadsItsPointerAtEachCall) {
  // Lazy binding rewrites a GOT entry after the first call: the pad must call
  // through the same pointer, not a copy of its value at install.
  slot(0).enabled = 1;
  put(0, {0xff, 0x15, 0x22, 0, 0, 0});     // call *+40
  put(6, {0x48, 0x83, 0xc0, 0x01, 0xc3});  // add $1,%rax; ret
  put(32, {0x48, 0x8d, 0x04, 0x3f, 0xc3}); // lea (%rdi,%rdi),%rax; ret
  put(48, {0x48, 0x8d, 0x47, 0x0a, 0xc3}); // lea 10(%rdi),%rax; ret
  uint64_t first = uint64_t(site_ + 32), second = uint64_t(site_ + 48);
  std::memcpy(site_ + 40, &first, 8);
  patch({PadTracepoint{0, {}, true}});
  ASSERT_EQ(call(3), 7);
  std::memcpy(site_ + 40, &second, 8);
  ASSERT_EQ(call(3), 14);
  EXPECT_EQ(records_at(site_), 2u);
}

// The stub's poll drains only past a fill mark: the backlog it reads from the
// ring heads is what the pads committed and the stub has not taken.
TEST_F(PadExec, RingBacklogCountsWhatTheStubHasNotTaken) {
  slot(0).enabled = 1;
  patch({PadTracepoint{0, {}, true}});
  const uint8_t* heads = base_ + kRingHeadsOffset;
  EXPECT_EQ(ring_backlog(heads, tails_), 0u);
  // One CPU, so one ring: the backlog is the most in any ring.
  cpu_set_t was, one;
  ASSERT_EQ(sched_getaffinity(0, sizeof was, &was), 0);
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu(), &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  for (long i = 0; i < 5; ++i)
    call(i);
  sched_setaffinity(0, sizeof was, &was);
  EXPECT_EQ(ring_backlog(heads, tails_), 5u);
  EXPECT_EQ(take_records(base_ + kRingOffset, slots_, tails_).size(), 5u);
  EXPECT_EQ(ring_backlog(heads, tails_), 0u);
  // A head the tracee scribbled on reads as a large backlog (a drain, which checks every slot).
  reinterpret_cast<RingHead*>(base_ + kRingHeadsOffset)[1].head = tails_[1] - 1;
  EXPECT_GT(ring_backlog(heads, tails_), uint64_t(slots_));
}

TEST_F(PadExec, ThreadsShareRingsWithoutLosingRecords) {
  slots_ = 1024;
  TearDown();
  SetUp();
  slot(0).enabled = 1;
  patch({PadTracepoint{0, {{0, 1}}, true}});
  constexpr int kThreads = 4, kCalls = 20000;
  std::atomic<bool> done{false};
  std::atomic<long> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (long i = 0; i < kCalls; ++i)
        if (call(i + t) != i + t + 100)
          wrong++;
    });
  size_t taken = 0;
  std::thread drainer([&] {
    while (!done)
      taken += take_records(base_ + kRingOffset, slots_, tails_).size();
  });
  for (auto& th : threads)
    th.join();
  done = true;
  drainer.join();
  taken += take_records(base_ + kRingOffset, slots_, tails_).size();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(taken + slot(0).drops, uint64_t(kThreads * kCalls)); // the stub's TSV adds count these
  EXPECT_EQ(tsv(0), 0);
}

// ---- conditions compiled into the pad, against the reference evaluator ----

AgentExpr verified_condition(std::vector<uint8_t> code) {
  auto e = verify_expr(std::move(code), true, VerifyEnv{GT_NUM_REGS_AVX, nullptr}, "condition");
  EXPECT_TRUE(e) << e.error().message;
  return e ? *e : AgentExpr{};
}

// ax_eval's answer with rdi = X (the only register these programs read).
bool reference(const AgentExpr& e, long x) {
  struct ax_env env {};
  env.opaque = &x;
  env.read_reg = [](void* opaque, uint32_t regno, uint64_t* v) {
    if (regno != GT_RDI)
      return -1;
    *v = uint64_t(*static_cast<long*>(opaque));
    return 0;
  };
  uint64_t result = 0;
  EXPECT_EQ(ax_eval(e.code.data(), &e.info, &env, &result), 0);
  return result != 0;
}

TEST_F(PadExec, ConditionsAgreeWithTheReferenceEvaluator) {
  slots_ = 1024;
  TearDown();
  SetUp();
  using V = std::vector<uint8_t>;
  const uint8_t x = AX_OP_REG, rdi_hi = 0, rdi_lo = GT_RDI;
  const std::vector<V> programs = {
      {x, rdi_hi, rdi_lo, AX_OP_CONST8, 7, AX_OP_EQUAL, AX_OP_END}, // x == 7
      // (x & 3) == 0 || x < 2, as gdb compiles ||: A; dup; if_goto L; pop; B; L: end
      {x, rdi_hi, rdi_lo, AX_OP_CONST8, 3, AX_OP_BIT_AND, AX_OP_LOG_NOT, AX_OP_DUP, AX_OP_IF_GOTO,
       0, 18, AX_OP_POP, x, rdi_hi, rdi_lo, AX_OP_CONST8, 2, AX_OP_LESS_SIGNED, AX_OP_END},
      // (int8_t)x < 0 and zero_ext 4 == 5
      {x, rdi_hi, rdi_lo, AX_OP_EXT, 8, AX_OP_CONST8, 0, AX_OP_LESS_SIGNED, AX_OP_END},
      {x, rdi_hi, rdi_lo, AX_OP_ZERO_EXT, 4, AX_OP_CONST8, 5, AX_OP_EQUAL, AX_OP_END},
      // shifts, counts of 64 and more included: (x << 70) == 0, (x - 50) >>s 100 == -1, x >>u 2 < 9
      {x, rdi_hi, rdi_lo, AX_OP_CONST8, 70, AX_OP_LSH, AX_OP_LOG_NOT, AX_OP_END},
      {x, rdi_hi, rdi_lo, AX_OP_CONST8, 50, AX_OP_SUB, AX_OP_CONST8, 100, AX_OP_RSH_SIGNED,
       AX_OP_BIT_NOT, AX_OP_LOG_NOT, AX_OP_END},
      {x, rdi_hi, rdi_lo, AX_OP_CONST8, 2, AX_OP_RSH_UNSIGNED, AX_OP_CONST8, 9, AX_OP_LESS_UNSIGNED,
       AX_OP_END},
      // (3x - 5) ^ 0x55 < 40 (signed), and 1, x; swap; sub: x - 1 <u 10
      {x, rdi_hi, rdi_lo, AX_OP_CONST8, 3, AX_OP_MUL, AX_OP_CONST8, 5, AX_OP_SUB, AX_OP_CONST8,
       0x55, AX_OP_BIT_XOR, AX_OP_CONST8, 40, AX_OP_LESS_SIGNED, AX_OP_END},
      {AX_OP_CONST8, 1, x, rdi_hi, rdi_lo, AX_OP_SWAP, AX_OP_SUB, AX_OP_CONST8, 10,
       AX_OP_LESS_UNSIGNED, AX_OP_END},
      // goto over a `false; end`: x odd
      {AX_OP_GOTO, 0, 6, AX_OP_CONST8, 0, AX_OP_END, x, rdi_hi, rdi_lo, AX_OP_CONST8, 1,
       AX_OP_BIT_AND, AX_OP_END},
      // x | 0x10 == 0x17 with a 64-bit constant compare: x in {7, 0x17}
      {x, rdi_hi, rdi_lo, AX_OP_CONST64, 0, 0, 0, 0, 0, 0, 0, 0x10, AX_OP_BIT_OR, AX_OP_CONST16, 0,
       0x17, AX_OP_EQUAL, AX_OP_END},
  };
  const long inputs[] = {-300, -129, -128, -70, -1, 0,  1,   2,   3,   4,   5,        7,
                         8,    21,   23,   49,  50, 51, 100, 127, 128, 255, 1L << 40, -(1L << 40)};
  for (size_t p = 0; p < programs.size(); ++p) {
    AgentExpr cond = verified_condition(programs[p]);
    ASSERT_TRUE(check_condition(cond)) << "program " << p;
    std::memcpy(site_, kPadTestSite,
                sizeof kPadTestSite); // unpatched, then a pad with this condition
    slot(0).enabled = 1;
    patch({PadTracepoint{0, {}, true, cond}});
    for (long in : inputs) {
      ASSERT_EQ(call(in), in + 100);
      size_t records = take_records(base_ + kRingOffset, slots_, tails_).size();
      EXPECT_EQ(records, reference(cond, in) ? 1u : 0u) << "program " << p << ", x = " << in;
    }
  }
}

TEST_F(PadExec, ConditionsOnRspAndRip) {
  slot(0).enabled = 1;
  // rsp at the site is 8 mod 16 (after the call's push); rip is the site.
  std::vector<uint8_t> rsp = {AX_OP_REG,    0, GT_RSP,      AX_OP_CONST8, 15, AX_OP_BIT_AND,
                              AX_OP_CONST8, 8, AX_OP_EQUAL, AX_OP_END};
  std::vector<uint8_t> rip = {AX_OP_REG, 0, GT_RIP, AX_OP_CONST64};
  for (int shift = 56; shift >= 0; shift -= 8)
    rip.push_back(uint8_t(uint64_t(site_) >> shift));
  rip.insert(rip.end(), {AX_OP_EQUAL, AX_OP_END});
  // Pads writing no records, so each condition's TSV add is done in the pad.
  patch({PadTracepoint{0, {{0, 1}}, false, verified_condition(rsp)},
         PadTracepoint{0, {{1, 1}}, false, verified_condition(rip)}});
  for (long i = 0; i < 5; ++i)
    ASSERT_EQ(call(i), i + 100);
  EXPECT_EQ(tsv(0), 5);
  EXPECT_EQ(tsv(1), 5);
  EXPECT_EQ(slot(0).hits, 10u);
}

TEST_F(PadExec, AFalseConditionSkipsCountsAndTsvs) {
  slot(0).enabled = 1;
  // x == 3: one hit of ten passes; a non-recording tracepoint counts only that one.
  auto cond = verified_condition({AX_OP_REG, 0, GT_RDI, AX_OP_CONST8, 3, AX_OP_EQUAL, AX_OP_END});
  patch({PadTracepoint{0, {{0, 5}}, false, cond}});
  for (long i = 0; i < 10; ++i)
    ASSERT_EQ(call(i), i + 100);
  EXPECT_EQ(slot(0).hits, 1u);
  EXPECT_EQ(tsv(0), 5);
}

TEST(JumppadConditions, RefusedWithTheReason) {
  auto reason = [](std::vector<uint8_t> code) {
    auto r = check_condition(verified_condition(std::move(code)));
    return r ? std::string("compiled") : r.error().message;
  };
  EXPECT_NE(reason({AX_OP_REG, 0, GT_RDI, AX_OP_REF32, AX_OP_END}).find("reads memory"),
            std::string::npos);
  EXPECT_NE(reason({AX_OP_REG, 0, GT_RDI, AX_OP_CONST8, 3, AX_OP_DIV_SIGNED, AX_OP_END})
                .find("`div_signed`"),
            std::string::npos);
  EXPECT_NE(reason({AX_OP_REG, 0, 40, AX_OP_END}).find("register 40"), std::string::npos);
  // A loop: the verifier bounds it with the step budget; the pad has none.
  EXPECT_NE(
      reason({AX_OP_CONST8, 1, AX_OP_IF_GOTO, 0, 0, AX_OP_CONST8, 0, AX_OP_END}).find("loops"),
      std::string::npos);
}

} // namespace
} // namespace gdbtrace::jumppad
