#include <gtest/gtest.h>

#include "abi/amd64_regs.h"
#include "trace/tracepoint_parser.h"

using namespace gdbtrace;

// verify_expr keeps what the verifier proved, so collectors never decode
// bytecode again: per-pc stack depths and the TSVs read and written.
TEST(VerifyExpr, KeepsDepthsAndTsvs) {
  VerifyEnv env;
  env.num_regs = GT_NUM_REGS_AVX;
  env.tsv_exists = [](uint32_t n) { return n == 1 || n == 2; };
  // getv 2; const8 1; add; setv 1; tracev 2; end
  std::vector<uint8_t> code = {0x2c, 0, 2, 0x22, 1, 0x02, 0x2d, 0, 1, 0x2e, 0, 2, 0x27};
  auto e = verify_expr(code, false, env, "test");
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ(e->depth, (std::vector<int16_t>{0, -1, -1, 1, -1, 2, 1, -1, -1, 1, -1, -1, 1}));
  EXPECT_EQ(e->tsvs_read, (std::vector<uint32_t>{2}));
  EXPECT_EQ(e->tsvs_written, (std::vector<uint32_t>{1}));
}
