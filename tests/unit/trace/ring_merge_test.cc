// The per-CPU ring merge both kernel collectors drain through.
#include "trace/ring_merge.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace gdbtrace {
namespace {

// A merge over rings starting at START, fed records given as
// {ring, order, text, next position}; the texts live as long as the merge.
struct Merge {
  struct Rec {
    uint32_t ring;
    uint64_t order;
    std::string text;
    uint64_t next;
  };
  Merge(std::vector<uint64_t> start, std::vector<Rec> recs) : recs_(std::move(recs)) {
    m.begin(start);
    for (const auto& r : recs_)
      m.add(r.ring, r.order, reinterpret_cast<const uint8_t*>(r.text.data()),
            uint32_t(r.text.size()), r.next);
  }
  // Everything handed out, concatenated, taking at most LIMIT records and
  // none past MAX_ORDER.
  std::string drain(size_t limit = SIZE_MAX, uint64_t max_order = UINT64_MAX) {
    std::string got;
    m.hand_out(
        [&](std::span<const uint8_t> r, uint64_t) {
          if (limit-- == 0)
            return false;
          got.append(r.begin(), r.end());
          return true;
        },
        max_order);
    return got;
  }
  RingMerge m;

private:
  std::vector<Rec> recs_;
};

TEST(RingMerge, HandsOutInHitOrderAcrossRings) {
  // A thread that migrated: hits 1 and 3 on ring 0, hit 2 on ring 1.
  Merge t({100, 200}, {{0, 1, "one", 110}, {0, 3, "three", 120}, {1, 2, "two", 210}});
  t.m.scanned(0, 128); // a pad after the last record
  t.m.scanned(1, 210);
  EXPECT_EQ(t.drain(), "onetwothree");
  EXPECT_EQ(t.m.free_to(0), 128u); // all handed out: past the pad too
  EXPECT_EQ(t.m.free_to(1), 210u);
}

TEST(RingMerge, StopsWhereTheConsumerStopsAndKeepsTheRest) {
  Merge t({0, 0}, {{0, 1, "a", 8}, {1, 2, "b", 8}, {0, 3, "c", 16}});
  t.m.scanned(0, 24);
  t.m.scanned(1, 8);
  EXPECT_EQ(t.drain(2), "ab");
  EXPECT_EQ(t.m.free_to(0), 8u); // "c" stays in ring 0 for the next drain
  EXPECT_EQ(t.m.free_to(1), 8u);
}

TEST(RingMerge, EqualOrdersKeepTheOrderTheyWereAddedIn) {
  Merge t({0}, {{0, 5, "x", 8}, {0, 5, "y", 16}});
  t.m.scanned(0, 16);
  EXPECT_EQ(t.drain(), "xy");
}

// Three rings' runs merged: hit order across them, and a record whose order
// equals one of an earlier ring's comes after it, as it was added after it.
TEST(RingMerge, RunsOfSeveralRingsMergeInHitOrder) {
  Merge t({0, 0, 0}, {{0, 1, "a", 8},
                      {0, 4, "d", 16},
                      {0, 7, "g", 24},
                      {1, 2, "b", 8},
                      {1, 4, "D", 16},
                      {1, 8, "h", 24},
                      {2, 3, "c", 8},
                      {2, 5, "e", 16},
                      {2, 6, "f", 24}});
  for (uint32_t r = 0; r < 3; r++)
    t.m.scanned(r, 24);
  EXPECT_EQ(t.drain(), "abcdDefgh");
}

// A ring whose records are out of hit order (a sleepable program preempted
// between its stamp and its reservation) is sorted all the same.
TEST(RingMerge, ARingOutOfHitOrderIsSortedToo) {
  Merge t({0, 0}, {{0, 3, "c", 8}, {0, 1, "a", 16}, {1, 2, "b", 8}, {1, 4, "d", 16}});
  t.m.scanned(0, 16);
  t.m.scanned(1, 16);
  EXPECT_EQ(t.drain(), "abcd");
}

TEST(RingMerge, AnEmptyRingIsFreedUpToWhatWasScanned) {
  Merge t({40}, {});
  t.m.scanned(0, 48); // only a discarded record
  EXPECT_EQ(t.drain(), "");
  EXPECT_EQ(t.m.free_to(0), 48u);
}

// A drain pass that looked at only part of ring 0 (up to order 3) hands out
// nothing past order 3: ring 0's next records, not looked at yet, may come
// before ring 1's order 4. Ring 0 is freed past what it handed out, ring 1 up
// to its last record handed out.
TEST(RingMerge, PassBoundedByARingSeenInPart) {
  Merge t({0, 0}, {{0, 1, "a", 8}, {0, 3, "c", 16}, {1, 2, "b", 8}, {1, 4, "d", 16}});
  t.m.scanned(0, 16);
  t.m.scanned(1, 16);
  EXPECT_EQ(t.drain(SIZE_MAX, 3), "abc");
  EXPECT_EQ(t.m.free_to(0), 16u);
  EXPECT_EQ(t.m.free_to(1), 8u); // "d" is looked at again by the next pass
}

} // namespace
} // namespace gdbtrace
