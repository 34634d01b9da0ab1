#include <gtest/gtest.h>

#include "trace/agent_printf.h"

using namespace gdbtrace;

TEST(AgentPrintf, IntegersAndStrings) {
  uint64_t args[] = {uint64_t(-5), 255, 0x1000, 'z'};
  auto out =
      agent_printf("a=%d b=%#x s=%s c=%c%%\n", args, [](uint64_t addr) -> Result<std::string> {
        EXPECT_EQ(addr, 0x1000u);
        return std::string("hello");
      });
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(*out, "a=-5 b=0xff s=hello c=z%\n");
}

TEST(AgentPrintf, LongAndWidth) {
  uint64_t args[] = {uint64_t(-1), 42};
  auto out = agent_printf("%ld|%5lu|", args, nullptr);
  ASSERT_TRUE(out);
  EXPECT_EQ(*out, "-1|   42|");
}

TEST(AgentPrintf, Errors) {
  uint64_t args[] = {1};
  EXPECT_FALSE(agent_printf("%d %d", args, nullptr));
  EXPECT_FALSE(agent_printf("%f", args, nullptr));
  EXPECT_FALSE(agent_printf("%", args, nullptr));
}
