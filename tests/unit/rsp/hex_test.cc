#include <gtest/gtest.h>

#include "rsp/hex.h"

using namespace gdbtrace::rsp;

TEST(Hex, RoundTrip) {
  std::string bytes("\x00\x01\x7f\x80\xff", 5);
  EXPECT_EQ(to_hex(bytes), "00017f80ff");
  EXPECT_EQ(from_hex("00017f80FF"), bytes);
}

TEST(Hex, RejectsOddLengthAndNonHex) {
  EXPECT_FALSE(from_hex("abc"));
  EXPECT_FALSE(from_hex("zz"));
}

TEST(Hex, ParseNumber) {
  EXPECT_EQ(parse_hex_u64("7ffff7fe4b70"), 0x7ffff7fe4b70u);
  EXPECT_EQ(parse_hex_u64("ffffffffffffffff"), UINT64_MAX);
  EXPECT_FALSE(parse_hex_u64(""));
  EXPECT_FALSE(parse_hex_u64("1ffffffffffffffff")); // overflow
  EXPECT_FALSE(parse_hex_u64("-1"));
  EXPECT_EQ(hex_number(0), "0");
  EXPECT_EQ(hex_number(0x5dbd), "5dbd");
}
