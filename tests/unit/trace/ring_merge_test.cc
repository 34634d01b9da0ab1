// The per-CPU ring merge both kernel collectors drain through.
#include "trace/ring_merge.h"

#include <gtest/gtest.h>

#include <string>

namespace gdbtrace {
namespace {

std::span<const uint8_t> bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(RingMerge, HandsOutInHitOrderAcrossRings) {
  // A thread that migrated: hits 1 and 3 on ring 0, hit 2 on ring 1.
  std::string a = "one", b = "two", c = "three";
  uint64_t start[2] = {100, 200};
  RingMerge m;
  m.begin(start);
  m.add(0, 1, bytes(a).data(), 3, 110);
  m.add(0, 3, bytes(c).data(), 5, 120);
  m.scanned(0, 128); // a pad after the last record
  m.add(1, 2, bytes(b).data(), 3, 210);
  m.scanned(1, 210);
  std::vector<std::string> got;
  EXPECT_EQ(m.hand_out([&](std::span<const uint8_t> r) {
    got.emplace_back(r.begin(), r.end());
    return true;
  }),
            3u);
  EXPECT_EQ(got, (std::vector<std::string>{"one", "two", "three"}));
  EXPECT_EQ(m.free_to(0), 128u); // all handed out: past the pad too
  EXPECT_EQ(m.free_to(1), 210u);
}

TEST(RingMerge, StopsWhereTheConsumerStopsAndKeepsTheRest) {
  std::string a = "a", b = "b", c = "c";
  uint64_t start[2] = {0, 0};
  RingMerge m;
  m.begin(start);
  m.add(0, 1, bytes(a).data(), 1, 8);
  m.add(1, 2, bytes(b).data(), 1, 8);
  m.add(0, 3, bytes(c).data(), 1, 16);
  m.scanned(0, 24);
  m.scanned(1, 8);
  int n = 0;
  EXPECT_EQ(m.hand_out([&](std::span<const uint8_t>) { return ++n <= 2; }), 2u);
  EXPECT_EQ(m.free_to(0), 8u); // "c" stays in ring 0 for the next drain
  EXPECT_EQ(m.free_to(1), 8u);
}

TEST(RingMerge, EqualOrdersKeepTheOrderTheyWereAddedIn) {
  std::string a = "x", b = "y";
  uint64_t start[1] = {0};
  RingMerge m;
  m.begin(start);
  m.add(0, 5, bytes(a).data(), 1, 8);
  m.add(0, 5, bytes(b).data(), 1, 16);
  m.scanned(0, 16);
  std::string got;
  m.hand_out([&](std::span<const uint8_t> r) {
    got.append(r.begin(), r.end());
    return true;
  });
  EXPECT_EQ(got, "xy");
}

TEST(RingMerge, AnEmptyRingIsFreedUpToWhatWasScanned) {
  uint64_t start[1] = {40};
  RingMerge m;
  m.begin(start);
  m.scanned(0, 48); // only a discarded record
  EXPECT_EQ(m.hand_out([](std::span<const uint8_t>) { return true; }), 0u);
  EXPECT_EQ(m.free_to(0), 48u);
}

// A drain pass that looked at only part of ring 0 (up to order 3) hands out
// nothing past order 3: ring 0's next records, not looked at yet, may come
// before ring 1's order 4. Ring 0 is freed past what it handed out, ring 1 up
// to its last record handed out.
TEST(RingMerge, PassBoundedByARingSeenInPart) {
  std::string a = "a", b = "b", c = "c", d = "d";
  uint64_t start[2] = {0, 0};
  RingMerge m;
  m.begin(start);
  m.add(0, 1, bytes(a).data(), 1, 8);
  m.add(0, 3, bytes(c).data(), 1, 16);
  m.scanned(0, 16);
  m.add(1, 2, bytes(b).data(), 1, 8);
  m.add(1, 4, bytes(d).data(), 1, 16);
  m.scanned(1, 16);
  std::vector<std::string> got;
  EXPECT_EQ(m.hand_out(
                [&](std::span<const uint8_t> r) {
                  got.emplace_back(r.begin(), r.end());
                  return true;
                },
                3),
            3u);
  EXPECT_EQ(got, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(m.free_to(0), 16u);
  EXPECT_EQ(m.free_to(1), 8u); // "d" is looked at again by the next pass
}

} // namespace
} // namespace gdbtrace
