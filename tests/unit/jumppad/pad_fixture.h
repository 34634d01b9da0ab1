// The fixture the emitted-pad tests share: one mapping holding a small area
// (tp slots, TSVs, ring heads, code, two rings) and, after it, a function of the
// test's own that is the site (its first instruction a rip-relative load), so
// the pad, the site and the armed word are all within rel32 of each other.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <sys/mman.h>

#include "jumppad/jumppad_area.h"
#include "jumppad/jumppad_site.h"

namespace gdbtrace::jumppad {

// mov 9(%rip),%rax (the u64 at +16); add %rdi,%rax; ret; ...; u64 100
inline constexpr uint8_t kPadTestSite[] = {0x48, 0x8b, 0x05, 0x09, 0x00, 0x00, 0x00, 0x48,
                                           0x01, 0xf8, 0xc3, 0x90, 0x90, 0x90, 0x90, 0x90,
                                           100,  0,    0,    0,    0,    0,    0,    0};

class PadFixture : public ::testing::Test {
protected:
  void SetUp() override {
    area_size_ = kRingOffset + kRings * ring_stride(slots_);
    total_ = area_size_ + 4096;
    void* p = mmap(nullptr, total_, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    base_ = static_cast<uint8_t*>(p);
    init_rings(base_ + kRingOffset, kRings, slots_);
    site_ = base_ + area_size_;
    std::memcpy(site_, kPadTestSite, sizeof kPadTestSite);
    tails_.assign(kRings, 0);
    armed_ref() = 1;
  }
  void TearDown() override { munmap(base_, total_); }

  TpSlot& slot(uint32_t i) { return reinterpret_cast<TpSlot*>(base_ + kTpSlotsOffset)[i]; }
  int64_t tsv(uint32_t i) { return reinterpret_cast<int64_t*>(base_ + kTsvOffset)[i]; }
  // Must be within rel32 of the pad: a global of the test is not (PIE, mmap far
  // away), so it lives in the region's tail.
  uint32_t& armed_ref() { return *reinterpret_cast<uint32_t*>(site_ + 2048); }

  // Installs a pad for TPS over the site (the function's first instruction, or
  // AT); FIXUPS, when given, gets the pad's fault table (offsets in the pad).
  void patch(std::vector<PadTracepoint> tps, uint8_t* at = nullptr,
             std::vector<FaultFixup>* fixups = nullptr) {
    at = at ? at : site_;
    auto plan = plan_site({at, 16});
    ASSERT_TRUE(plan) << plan.error().message;
    PadSpec spec;
    spec.site = uint64_t(at);
    spec.pad = pad();
    spec.area = uint64_t(base_);
    spec.armed = uint64_t(&armed_ref());
    spec.ring_mask = kRings - 1;
    spec.slot_mask = slots_ - 1;
    spec.ring_stride = uint32_t(ring_stride(slots_));
    spec.rdpid = rdpid_;
    spec.sahf = sahf_;
    spec.plan = *plan;
    spec.tps = std::move(tps);
    auto code = emit_pad(spec, fixups);
    ASSERT_TRUE(code) << code.error().message;
    std::memcpy(base_ + kCodeOffset, code->data(), code->size());
    if (fixups)
      for (const FaultFixup& f : *fixups) {
        ASSERT_LT(f.fault, code->size());
        ASSERT_LT(f.recovery, code->size());
      }
    auto jmp = site_jump(uint64_t(at), pad());
    ASSERT_TRUE(jmp);
    std::memcpy(at, jmp->data(), jmp->size());
  }
  uint64_t pad() const { return uint64_t(base_ + kCodeOffset); }
  long call(long x) { return reinterpret_cast<long (*)(long)>(site_)(x); }
  std::vector<Record> take() { return take_records(base_ + kRingOffset, slots_, tails_); }

  static constexpr uint32_t kRings = 2;
  uint32_t slots_ = 16;
  uint64_t area_size_ = 0, total_ = 0;
  uint8_t* base_ = nullptr;
  uint8_t* site_ = nullptr;
  std::vector<uint64_t> tails_;
  bool rdpid_ = false; // the rdtscp form; RdpidFormRecordsToo runs the other
  bool sahf_ = false;  // popfq; FlagsSurviveThePad runs both
};

} // namespace gdbtrace::jumppad
