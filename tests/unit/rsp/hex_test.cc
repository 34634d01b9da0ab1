// common/hex.h: the one hex library (RSP payloads, tracepoint packets, tfiles).
#include <gtest/gtest.h>

#include "common/hex.h"

using namespace gdbtrace;

TEST(Hex, RoundTrip) {
  std::string bytes("\x00\x01\x7f\x80\xff", 5);
  EXPECT_EQ(hex::encode(bytes), "00017f80ff");
  EXPECT_EQ(hex::decode_string("00017f80FF"), bytes);
}

TEST(Hex, RejectsOddLengthAndNonHex) {
  EXPECT_FALSE(hex::decode_string("abc"));
  EXPECT_FALSE(hex::decode_string("zz"));
}

TEST(Hex, ParseNumber) {
  EXPECT_EQ(hex::parse_u64("7ffff7fe4b70"), 0x7ffff7fe4b70u);
  EXPECT_EQ(hex::parse_u64("ffffffffffffffff"), UINT64_MAX);
  EXPECT_FALSE(hex::parse_u64(""));
  EXPECT_FALSE(hex::parse_u64("1ffffffffffffffff")); // overflow
  EXPECT_FALSE(hex::parse_u64("-1"));
  EXPECT_FALSE(hex::parse_u64("12,"));
  EXPECT_EQ(hex::u64(0), "0");
  EXPECT_EQ(hex::u64(0x5dbd), "5dbd");
}

TEST(Hex, TakeConsumesOnlyWhatMatched) {
  std::string_view s = "1f:rest";
  uint64_t v = 0;
  ASSERT_TRUE(hex::take_u64(s, v));
  EXPECT_EQ(v, 0x1fu);
  EXPECT_FALSE(hex::take_char(s, ','));
  EXPECT_TRUE(hex::take_char(s, ':'));
  EXPECT_FALSE(hex::take_u64(s, v));
  EXPECT_TRUE(hex::take_prefix(s, "re"));
  EXPECT_EQ(s, "st");
}
