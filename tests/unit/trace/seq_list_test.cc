#include "trace/seq_list.h"

#include <gtest/gtest.h>

using gdbtrace::SeqList;

TEST(SeqList, FindsTheFirstLiveNumberFromAnyPoint) {
  SeqList l;
  for (uint64_t s : {10, 12, 20, 21})
    l.push_back(s);
  EXPECT_EQ(l.first_from(0), 10u);
  EXPECT_EQ(l.first_from(11), 12u);
  EXPECT_EQ(l.first_from(21), 21u);
  EXPECT_EQ(l.first_from(22), std::nullopt);
  l.pop_front();
  EXPECT_EQ(l.first_from(0), 12u); // popped numbers are not found
  EXPECT_EQ(l.size(), 3u);
}

// A circular trace of hours goes far past 2^32 frames; a list's numbers are
// kept as 32-bit offsets from a base that moves with its oldest live number.
TEST(SeqList, NumbersBeyondThirtyTwoBitsKeepTheirOrder) {
  SeqList l;
  const uint64_t big = uint64_t(1) << 40;
  l.push_back(5);
  l.push_back(7);
  l.pop_front();
  l.pop_front(); // empty: the next number starts a new base
  l.push_back(big);
  l.push_back(big + 3);
  EXPECT_EQ(l.first_from(0), big);
  EXPECT_EQ(l.first_from(big + 1), big + 3);
  // A live number with a dead prefix far behind it: the push compacts and rebases.
  SeqList m;
  m.push_back(1);
  m.push_back(2);
  m.push_back(3);
  m.pop_front(); // 2 and 3 live, 1 dead but kept (less than half)
  m.push_back(2 + SeqList::kMaxSpan);
  EXPECT_EQ(m.first_from(0), 2u);
  EXPECT_EQ(m.first_from(4), 2 + SeqList::kMaxSpan);
  EXPECT_EQ(m.first_from(3 + SeqList::kMaxSpan), std::nullopt);
  EXPECT_EQ(m.size(), 3u);
}

// A long list is pushed into storage made present first (prepare()):
// every number survives the doublings, with popped fronts and a moved base.
TEST(SeqList, ALongListKeepsEveryNumberThroughItsGrowth) {
  SeqList l;
  const uint64_t n = 8 * SeqList::kPreparedGrowth + 3;
  for (uint64_t s = 0; s < n; ++s)
    l.push_back(100 + 2 * s);
  for (int i = 0; i < 5; ++i)
    l.pop_front();
  EXPECT_EQ(l.size(), n - 5);
  EXPECT_EQ(l.first_from(0), 110u);
  for (uint64_t s = 5; s < n; s += 4099)
    EXPECT_EQ(l.first_from(100 + 2 * s - 1), 100 + 2 * s);
  EXPECT_EQ(l.first_from(100 + 2 * n), std::nullopt);
}
