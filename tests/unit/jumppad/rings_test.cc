// take_batch: records in slot order, at most MAX a ring, and the stamp up to
// which a caller may order what it took without missing an earlier record of
// a ring it cut short.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "jumppad/jumppad_area.h"
#include "jumppad/jumppad_layout.h"

namespace gdbtrace::jumppad {
namespace {

constexpr uint32_t kSlots = 16, kRings = 2;
constexpr uint32_t kShift = kSlotShift + 4; // 16 slots

struct Rings {
  std::vector<uint8_t> bytes = std::vector<uint8_t>(size_t(kRings) << kShift);
  std::vector<uint64_t> tails = std::vector<uint64_t>(kRings, 0);
  std::vector<uint64_t> heads = std::vector<uint64_t>(kRings, 0);
  Rings() { init_rings(bytes.data(), kRings, kSlots, kShift); }
  // A committed record in RING, as a pad writes one.
  void put(uint32_t ring, uint64_t stamp) {
    uint64_t pos = heads[ring]++;
    auto* r = reinterpret_cast<Record*>(bytes.data() + (uint64_t(ring) << kShift) +
                                        ((pos & (kSlots - 1)) << kSlotShift));
    r->stamp = stamp;
    r->tp_slot = ring;
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
  EXPECT_EQ(take_batch(r.bytes.data(), kSlots, kShift, r.tails, 4, out), 7u); // ring 0 cut at 7
  ASSERT_EQ(out.size(), 6u);
  EXPECT_EQ(out[3].stamp, 7u);
  EXPECT_EQ(out[4].stamp, 2u);
  out.clear();
  EXPECT_EQ(take_batch(r.bytes.data(), kSlots, kShift, r.tails, 4, out), UINT64_MAX);
  ASSERT_EQ(out.size(), 2u); // 9 and 11; nothing cut
  EXPECT_EQ(out[1].stamp, 11u);
  out.clear();
  EXPECT_EQ(take_batch(r.bytes.data(), kSlots, kShift, r.tails, 4, out), UINT64_MAX);
  EXPECT_TRUE(out.empty());
  // Freed slots take records again: a whole lap of ring 1.
  for (int i = 0; i < 16; ++i)
    r.put(1, 100 + i);
  auto lap = take_records(r.bytes.data(), kSlots, kShift, r.tails);
  ASSERT_EQ(lap.size(), 16u);
  EXPECT_EQ(lap.back().stamp, 115u);
}

} // namespace
} // namespace gdbtrace::jumppad
