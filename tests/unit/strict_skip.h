// GDBTRACE_SKIP(key) << why: GTEST_SKIP for a test that cannot run on this
// machine, except under CI=true or scripts/test.sh (GDBTRACE_STRICT=1), where
// it is a fatal failure: a green strict run must mean every test ran. A skip
// stays a skip in strict mode only when GDBTRACE_ALLOW_SKIP (comma-separated
// keys) names KEY; the README's "Skips allowed in strict mode" table says which
// key fits which machine. Usable wherever GTEST_SKIP is (test bodies, SetUp).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <string_view>

namespace gdbtrace::test {

// CI and scripts/test.sh: a missing collector, tool or kernel feature fails.
inline bool strict_mode() {
  const char* ci = std::getenv("CI");
  const char* strict = std::getenv("GDBTRACE_STRICT");
  return (ci && std::string_view(ci) == "true") || (strict && std::string_view(strict) == "1");
}

// Whether GDBTRACE_ALLOW_SKIP lists KEY (exactly, between commas).
inline bool skip_allowed(std::string_view key) {
  const char* env = std::getenv("GDBTRACE_ALLOW_SKIP");
  std::string_view list = env ? env : "";
  while (!list.empty()) {
    auto comma = list.find(',');
    if (list.substr(0, comma) == key)
      return true;
    if (comma == std::string_view::npos)
      break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

inline bool skip_fails(std::string_view key) {
  return strict_mode() && !skip_allowed(key);
}

// The text before the caller's reason; kept alive until the assertion is reported.
inline const char* skip_prefix(std::string_view key) {
  thread_local std::string text;
  text = skip_fails(key)
             ? "skip not allowed under CI=true / GDBTRACE_STRICT=1 (GDBTRACE_ALLOW_SKIP "
               "does not list '" +
                   std::string(key) + "'): "
             : "";
  return text.c_str();
}

} // namespace gdbtrace::test

// GTEST_SKIP and FAIL both expand to GTEST_MESSAGE_AT_ with a fixed result
// type; this picks the type at run time.
#define GDBTRACE_SKIP(key)                                                                         \
  return GTEST_MESSAGE_AT_(__FILE__, __LINE__, ::gdbtrace::test::skip_prefix(key),                 \
                           ::gdbtrace::test::skip_fails(key)                                       \
                               ? ::testing::TestPartResult::kFatalFailure                          \
                               : ::testing::TestPartResult::kSkip)
