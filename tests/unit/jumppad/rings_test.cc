// take_batch: records in slot order, at most MAX a ring, and the stamp up to
// which a caller may order what it took without missing an earlier record of
// a ring it cut short.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "jumppad/jumppad_area.h"
#include "jumppad/jumppad_layout.h"

namespace gdbtrace::jumppad {
namespace {

constexpr uint32_t kSlots = 16, kRings = 2;

struct Rings {
  std::vector<uint8_t> bytes = std::vector<uint8_t>(kRings * ring_stride(kSlots));
  std::vector<uint64_t> tails = std::vector<uint64_t>(kRings, 0);
  std::vector<uint64_t> heads = std::vector<uint64_t>(kRings, 0);
  Rings() { init_rings(bytes.data(), kRings, kSlots); }
  Record* at(uint32_t ring, uint64_t pos) {
    return reinterpret_cast<Record*>(bytes.data() + ring * ring_stride(kSlots) +
                                     (pos & (kSlots - 1)) * kSlotSize);
  }
  // A committed record of NSLOTS slots in RING, as a pad writes one: the second
  // position's seq first, the record's bytes from the first slot on (into the
  // overhang past the ring's last slot), the first position's seq last.
  void put(uint32_t ring, uint64_t stamp, uint16_t nslots = 1, uint8_t fill = 0) {
    uint64_t pos = heads[ring];
    heads[ring] += nslots;
    Record* r = at(ring, pos);
    if (nslots == 2) {
      at(ring, pos + 1)->seq = pos + 2;
      std::memset(reinterpret_cast<uint8_t*>(r) + record_mem_offset(2), fill, kRecordMemBytes);
    }
    r->stamp = stamp;
    r->tp_slot = uint16_t(ring);
    r->slots = nslots;
    r->seq = pos + 1;
  }
};

TEST(JumppadRings, ABatchCutShortLimitsTheOrderToItsLastStamp) {
  Rings r;
  for (uint64_t s : {1, 3, 5, 7, 9, 11})
    r.put(0, s);
  for (uint64_t s : {2, 4})
    r.put(1, s);
  std::vector<Record> out;
  EXPECT_EQ(take_batch(r.bytes.data(), kSlots, r.tails, 4, out), 7u); // ring 0 cut at 7
  ASSERT_EQ(out.size(), 6u);
  EXPECT_EQ(out[3].stamp, 7u);
  EXPECT_EQ(out[4].stamp, 2u);
  out.clear();
  EXPECT_EQ(take_batch(r.bytes.data(), kSlots, r.tails, 4, out), UINT64_MAX);
  ASSERT_EQ(out.size(), 2u); // 9 and 11; nothing cut
  EXPECT_EQ(out[1].stamp, 11u);
  out.clear();
  EXPECT_EQ(take_batch(r.bytes.data(), kSlots, r.tails, 4, out), UINT64_MAX);
  EXPECT_TRUE(out.empty());
  // Freed slots take records again: a whole lap of ring 1.
  for (int i = 0; i < 16; ++i)
    r.put(1, 100 + i);
  auto lap = take_records(r.bytes.data(), kSlots, r.tails);
  ASSERT_EQ(lap.size(), 16u);
  EXPECT_EQ(lap.back().stamp, 115u);
}

TEST(JumppadRings, TwoSlotRecordsRunOnPastTheLastSlot) {
  Rings r;
  for (int i = 0; i < 7; ++i)
    r.put(0, 1 + i);    // positions 0-6
  r.put(0, 8, 2, 0xab); // positions 7 and 8
  auto first = take_records(r.bytes.data(), kSlots, r.tails);
  ASSERT_EQ(first.size(), 8u);
  EXPECT_EQ(first.back().slots, 2);
  EXPECT_EQ(record_mem(first.back())[0], 0xab);
  EXPECT_EQ(r.tails[0], 9u);
  for (int i = 0; i < 6; ++i)
    r.put(0, 10 + i);    // positions 9-14
  r.put(0, 20, 2, 0xcd); // 15 (the last slot) and 16 (slot 0): bytes in the overhang
  r.put(0, 21);
  auto second = take_records(r.bytes.data(), kSlots, r.tails);
  ASSERT_EQ(second.size(), 8u);
  EXPECT_EQ(second[6].slots, 2);
  EXPECT_EQ(second[6].stamp, 20u);
  EXPECT_EQ(record_mem(second[6])[kRecordMemBytes - 1], 0xcd);
  EXPECT_EQ(second[7].stamp, 21u);
  EXPECT_EQ(r.at(0, 16)->seq, 16u + kSlots); // both positions freed for the next lap
}

TEST(JumppadRings, ABrokenTwoSlotRecordTakesOnePositionAndSaysSo) {
  Rings r;
  r.put(0, 1, 2);
  r.at(0, 1)->seq = 0; // the second position never committed: the tracee's bug
  r.put(1, 2);
  r.at(1, 0)->slots = 7; // garbage
  auto out = take_records(r.bytes.data(), kSlots, r.tails);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].slots, 0);
  EXPECT_EQ(out[1].slots, 0);
  EXPECT_EQ(r.tails[0], 1u);
  EXPECT_EQ(r.tails[1], 1u);
}

} // namespace
} // namespace gdbtrace::jumppad
