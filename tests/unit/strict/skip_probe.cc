// Not a test of the product: tests/unit/strict/selfcheck.sh runs this binary to
// check that GDBTRACE_SKIP fails a test in strict mode and skips it otherwise.
#include <gtest/gtest.h>

#include "../strict_skip.h"

TEST(StrictSkipProbe, AlwaysSkips) {
  GDBTRACE_SKIP("selfcheck") << "deliberately skipped";
}
