// Emitted pads that read memory (emit_memory_block), run in this process over a
// site of its own: ranges copied into the record after the registers; a read of
// an unmapped or PROT_NONE page recovered through the pad's fault table (this
// test's SIGSEGV handler plays the stub, which as the tracee's ptracer moves
// the faulting thread to the recovery address at the signal stop); with the
// guard word's tid bits clear nothing is read. And the guard word itself: the
// kernel clears it when the thread that armed it is SIGKILLed.
#include <gtest/gtest.h>

#include <csignal>
#include <cstring>
#include <sys/mman.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include "abi/amd64_regs.h"
#include "jumppad/jumppad_area.h"
#include "jumppad/jumppad_guard.h"
#include "jumppad/jumppad_site.h"
#include "pad_fixture.h"

namespace gdbtrace::jumppad {
namespace {

volatile uint64_t g_value = 0x1122334455667788;
volatile uint8_t g_odd[3] = {0xa1, 0xb2, 0xc3};

// What the SIGSEGV handler knows: the pad's fixups as absolute addresses.
std::vector<std::pair<uint64_t, uint64_t>> g_fixups;
volatile int g_faults = 0;

void on_segv(int, siginfo_t*, void* ctx) {
  auto* uc = static_cast<ucontext_t*>(ctx);
  const uint64_t rip = uint64_t(uc->uc_mcontext.gregs[REG_RIP]);
  for (const auto& [fault, recovery] : g_fixups)
    if (fault == rip) {
      uc->uc_mcontext.gregs[REG_RIP] = greg_t(recovery);
      g_faults = g_faults + 1;
      return;
    }
  signal(SIGSEGV, SIG_DFL); // not a pad read: the re-run fault kills the test
}

class PadMemory : public PadFixture {
protected:
  void SetUp() override {
    PadFixture::SetUp();
    guard() = 1; // tid bits set: the pad reads
    slot(0).enabled = 1;
    g_fixups.clear();
    g_faults = 0;
  }
  void TearDown() override {
    PadFixture::TearDown();
    signal(SIGSEGV, SIG_DFL);
  }

  uint32_t& guard() { return *reinterpret_cast<uint32_t*>(base_ + kGuardOffset); }

  // A pad collecting MEMORY; the SIGSEGV handler learns its fault table.
  void patch(std::vector<MemRange> memory) {
    std::vector<FaultFixup> fixups;
    PadFixture::patch({PadTracepoint{0, {}, true, std::nullopt, std::move(memory)}}, nullptr,
                      &fixups);
    for (const FaultFixup& f : fixups)
      g_fixups.push_back({pad() + f.fault, pad() + f.recovery});
  }
  void catch_faults() {
    struct sigaction sa {};
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    ASSERT_EQ(sigaction(SIGSEGV, &sa, nullptr), 0);
  }
  std::vector<Record> records() { return take(); }
};

uint64_t u64_at(const Record& r, size_t at) {
  uint64_t v;
  std::memcpy(&v, record_mem(r) + at, 8);
  return v;
}

TEST_F(PadMemory, CopiesAbsoluteAndRegisterRelativeRanges) {
  uint8_t buf[16];
  for (int i = 0; i < 16; ++i)
    buf[i] = uint8_t(0x40 + i);
  patch({{-1, uint64_t(&g_value), 8}, {GT_RDI, 8, 4}, {-1, uint64_t(&g_odd), 3}});
  EXPECT_TRUE(g_fixups.size() >= 4u); // one per load: 1 + 1 + 2
  const long x = long(buf);
  ASSERT_EQ(call(x), x + 100);
  auto rs = records();
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].mem_unreadable, 0u);
  EXPECT_EQ(u64_at(rs[0], 0), 0x1122334455667788u);
  EXPECT_EQ(0, std::memcmp(record_mem(rs[0]) + 8, buf + 8, 4));
  EXPECT_EQ(record_mem(rs[0])[12], 0xa1);
  EXPECT_EQ(record_mem(rs[0])[13], 0xb2);
  EXPECT_EQ(record_mem(rs[0])[14], 0xc3);
  EXPECT_EQ(rs[0].regs[9], uint64_t(x)); // the registers are still there
}

// Ranges over one slot's 24 bytes make two-slot records: positions taken in
// pairs, the second one's seq kept out of the bytes, a pair at the ring's last
// slot running on into the overhang. The rings start at position 1, so pairs
// start at odd positions and every lap has one at the last slot.
TEST_F(PadMemory, TwoSlotRecordsWrapTheRing) {
  uint8_t buf[kRecordMemBytes];
  for (uint32_t r = 0; r < kRings; ++r) {
    uint8_t* ring = base_ + kRingOffset + r * ring_stride(slots_);
    reinterpret_cast<Record*>(ring)->seq = slots_; // position 0 taken and freed
    reinterpret_cast<RingHead*>(base_ + kRingHeadsOffset)[r].head = 1;
    tails_[r] = 1;
  }
  patch({{GT_RDI, 0, uint32_t(kRecordMemBytes)}});
  uint64_t hits = 0;
  for (int lap = 0; lap < 6; ++lap) {
    for (int i = 0; i < 5; ++i, ++hits) {
      for (size_t k = 0; k < sizeof buf; ++k)
        buf[k] = uint8_t(hits + k);
      ASSERT_EQ(call(long(buf)), long(buf) + 100);
    }
    auto rs = records();
    ASSERT_EQ(rs.size(), 5u) << "lap " << lap;
    for (size_t j = 0; j < rs.size(); ++j) {
      const uint64_t hit = hits - rs.size() + j;
      EXPECT_EQ(rs[j].slots, 2);
      EXPECT_EQ(rs[j].mem_unreadable, 0u);
      for (size_t k = 0; k < kRecordMemBytes; ++k)
        ASSERT_EQ(record_mem(rs[j])[k], uint8_t(hit + k)) << "hit " << hit << " byte " << k;
    }
  }
  EXPECT_EQ(tails_[0] + tails_[1], 2 + 2 * hits);
  EXPECT_EQ(slot(0).drops, 0u);
}

TEST_F(PadMemory, AFaultingReadIsRecoveredThroughTheTable) {
  const long page = sysconf(_SC_PAGESIZE);
  auto* gone = static_cast<uint8_t*>(
      mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(gone, MAP_FAILED);
  uint8_t* none = gone + page;
  ASSERT_EQ(munmap(gone, page), 0);
  ASSERT_EQ(mprotect(none, page, PROT_NONE), 0);
  catch_faults();
  patch({{-1, uint64_t(&g_value), 8},
         {-1, uint64_t(gone), 8},
         {-1, uint64_t(none) + 16, 5},
         {-1, uint64_t(&g_value), 8}});
  for (long i = 0; i < 3; ++i)
    ASSERT_EQ(call(i), i + 100); // the relocated instruction still ran, the caller goes on
  EXPECT_EQ(g_faults, 6);        // one per bad range per hit: the rest of a range is skipped
  auto rs = records();
  ASSERT_EQ(rs.size(), 3u);
  for (const Record& r : rs) {
    EXPECT_EQ(r.mem_unreadable, 0b0110u);
    EXPECT_EQ(u64_at(r, 0), 0x1122334455667788u);
    EXPECT_EQ(u64_at(r, 21), 0x1122334455667788u); // packed: 8 + 8 + 5
  }
  munmap(none, page);
}

TEST_F(PadMemory, WithTheGuardClearNothingIsRead) {
  // What a pad does once the stub is gone: the kernel set the guard word to
  // FUTEX_OWNER_DIED (tid bits 0). No SIGSEGV handler here: a read would kill the test.
  guard() = 0x40000000;
  const long page = sysconf(_SC_PAGESIZE);
  void* gone = mmap(nullptr, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(gone, MAP_FAILED);
  munmap(gone, page);
  patch({{-1, uint64_t(gone), 8}, {-1, uint64_t(&g_value), 8}});
  ASSERT_EQ(call(7), 107);
  auto rs = records();
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].mem_unreadable, 0b11u);
}

TEST(JumppadGuard, TheKernelClearsTheWordWhenItsThreadIsKilled) {
  // A MAP_SHARED page pair: the entry (word - kEntryToWord) and the word, seen by this process
  // after the child that armed it is SIGKILLed (the stub's death).
  void* p = mmap(nullptr, 2 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  auto* word = reinterpret_cast<uint32_t*>(static_cast<uint8_t*>(p) + 4096 + 0x800);
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    char ok = guard::arm(word) ? 'y' : 'n';
    (void)!write(ready[1], &ok, 1);
    pause();
    _exit(0);
  }
  char ok = 0;
  ASSERT_EQ(read(ready[0], &ok, 1), 1);
  ASSERT_EQ(ok, 'y');
  EXPECT_EQ(*word, uint32_t(child)); // the child's only thread: tid = pid
  kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_EQ(*word & guard::kTidMask, 0u);
  EXPECT_EQ(*word, 0x40000000u); // FUTEX_OWNER_DIED
  close(ready[0]);
  close(ready[1]);
  munmap(p, 2 * 4096);
}

} // namespace
} // namespace gdbtrace::jumppad
