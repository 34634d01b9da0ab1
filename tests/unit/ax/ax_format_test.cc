// ax_format / ax_printf_check: the agent printf formatter, compared with the
// host's snprintf for the conversions gdb's format_pieces accepts.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "ax_test_util.h"

using namespace axtest;

namespace {

std::string fmt(const std::string& f, std::vector<uint64_t> args, FakeTarget* t = nullptr,
                uint32_t outlen = 256, int* rc_out = nullptr) {
  std::vector<char> out(outlen + 1, 'Z');
  int rc = ax_format(out.data(), outlen, f.c_str(), uint32_t(f.size() + 1), uint32_t(args.size()),
                     args.data(), t ? FakeTarget::read_mem : nullptr, t);
  if (rc_out)
    *rc_out = rc;
  if (rc < 0)
    return "<error " + std::to_string(rc) + ">";
  EXPECT_EQ(out[size_t(rc)], '\0');
  return std::string(out.data(), size_t(rc));
}

template <typename T> std::string host(const char* f, T v) {
  char buf[256];
  snprintf(buf, sizeof buf, f, v);
  return buf;
}

TEST(AxFormat, IntegersMatchSnprintf) {
  const char* int_fmts[] = {"%d",   "%i",    "%5d",   "%-5d|", "%05d", "%+d",     "% d",
                            "%.3d", "%8.3d", "%u",    "%x",    "%X",   "%#x",     "%#X",
                            "%o",   "%#o",   "%#.0o", "%.0d",  "%08x", "%-#10x|", "%hd",
                            "%hu",  "%hx",   "%c",    "%3c",   "%-3c|"};
  const int int_vals[] = {0, 1, -1, 42, -42, 255, 65536 + 7, 2147483647, -2147483647 - 1};
  for (const char* f : int_fmts)
    for (int v : int_vals) {
      if (std::string(f).find('c') != std::string::npos) {
        if (v < 32 || v > 126)
          continue; // printable only
      }
      EXPECT_EQ(fmt(f, {uint64_t(int64_t(v))}), host(f, v)) << f << " " << v;
    }
  const char* long_fmts[] = {"%ld", "%lu",   "%lx",      "%lld",  "%llu", "%llx",  "%zu",
                             "%zd", "%20ld", "%-20lld|", "%+lld", "%#lo", "%.20lx"};
  const long long long_vals[] = {0,
                                 1,
                                 -1,
                                 1234567890123LL,
                                 -1234567890123LL,
                                 (long long)0x8000000000000000ull,
                                 0x7fffffffffffffffLL};
  for (const char* f : long_fmts)
    for (long long v : long_vals)
      EXPECT_EQ(fmt(f, {uint64_t(v)}), host(f, v)) << f << " " << v;
}

TEST(AxFormat, IntArgumentsAreTruncatedLikeCVarargs) {
  // %d gets an int: the upper 32 bits of the 64-bit stack value are dropped.
  EXPECT_EQ(fmt("%d", {0x1ffffffffull}), "-1");
  EXPECT_EQ(fmt("%u", {0x100000005ull}), "5");
  EXPECT_EQ(fmt("%ld", {0x1ffffffffull}), "8589934591");
}

TEST(AxFormat, PointersAndLiterals) {
  EXPECT_EQ(fmt("%p", {0x1234}), "0x1234");
  EXPECT_EQ(fmt("%p", {0}), "(nil)");
  EXPECT_EQ(fmt("[%10p]", {0xabc}), host("[%10p]", (void*)0xabc));
  EXPECT_EQ(fmt("100%% done", {}), "100% done");
  EXPECT_EQ(fmt("tab\\there\\n\\\\ \\\"q\\\"", {}), "tab\there\n\\ \"q\"");
  EXPECT_EQ(fmt("", {}), "");
}

TEST(AxFormat, Strings) {
  FakeTarget t;
  t.map_str(0x1000, "hello");
  EXPECT_EQ(fmt("%s!", {0x1000}, &t), "hello!");
  EXPECT_EQ(fmt("[%8s]", {0x1000}, &t), "[   hello]");
  EXPECT_EQ(fmt("[%-8s]", {0x1000}, &t), "[hello   ]");
  EXPECT_EQ(fmt("[%.3s]", {0x1000}, &t), "[hel]");
  EXPECT_EQ(fmt("%s", {0}, &t), "(null)");
  int rc = 0;
  fmt("%s", {0x5000}, &t, 256, &rc);
  EXPECT_EQ(rc, AX_ERR_MEM);
  fmt("%s", {0x1000}, nullptr, 256, &rc); // no reader
  EXPECT_EQ(rc, AX_ERR_MEM);
  // A string with no NUL inside readable memory, but %.Ns bounds the read.
  t.map(0x2000, {'a', 'b', 'c'});
  EXPECT_EQ(fmt("%.3s", {0x2000}, &t), "abc");
  fmt("%s", {0x2000}, &t, 256, &rc);
  EXPECT_EQ(rc, AX_ERR_MEM);
}

TEST(AxFormat, LongStringsAreBounded) {
  FakeTarget t;
  t.map_str(0x10000, std::string(10000, 'x')); // longer than AX_FORMAT_MAX_STR
  std::vector<char> out(20000);
  uint64_t arg = 0x10000;
  int n = ax_format(out.data(), uint32_t(out.size()), "%s", 3, 1, &arg, FakeTarget::read_mem, &t);
  EXPECT_EQ(n, int(AX_FORMAT_MAX_STR));
}

TEST(AxFormat, OutputIsTruncatedAndTerminated) {
  EXPECT_EQ(fmt("abcdef", {}, nullptr, 4), "abc");
  EXPECT_EQ(fmt("%d", {123456}, nullptr, 3), "12");
  EXPECT_EQ(fmt("%100000d", {1}, nullptr, 8), "       "); // width clamped, output bounded
  char c = 'Z';
  EXPECT_EQ(ax_format(&c, 0, "abc", 4, 0, nullptr, nullptr, nullptr), 0);
  EXPECT_EQ(c, 'Z'); // outlen 0: nothing written
}

TEST(AxFormat, ArgumentCountMustMatch) {
  int rc = 0;
  fmt("%d %d", {1}, nullptr, 256, &rc);
  EXPECT_EQ(rc, AX_ERR_BAD_PRINTF);
  fmt("none", {1}, nullptr, 256, &rc);
  EXPECT_EQ(rc, AX_ERR_BAD_PRINTF);
}

TEST(AxPrintfCheck, CountsConversions) {
  uint32_t n = 99;
  int str = -1;
  const char f1[] = "a %d b %s c %% %lx";
  EXPECT_EQ(ax_printf_check(f1, sizeof f1, &n, &str), AX_OK);
  EXPECT_EQ(n, 3u);
  EXPECT_EQ(str, 1);
  const char f2[] = "plain";
  EXPECT_EQ(ax_printf_check(f2, sizeof f2, &n, &str), AX_OK);
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(str, 0);
  for (const char* bad : {"%f",  "%e",  "%g",  "%Lf",   "%n",  "%*d", "%.*d", "%ls",  "%lc",  "%hc",
                          "%q",  "%",   "%l",  "%I64d", "%#u", "% x", "%+o",  "%.2c", "%05c", "%lp",
                          "%#p", "%0s", "% s", "\\z",   "x\\", "\"",  "%hhd", "%Dd",  "%Hf"})
    EXPECT_EQ(ax_printf_check(bad, uint32_t(strlen(bad) + 1), &n, &str), AX_ERR_BAD_PRINTF) << bad;
  EXPECT_EQ(ax_printf_check("ab", 2, &n, &str), AX_ERR_BAD_PRINTF); // no NUL at the end
  EXPECT_EQ(ax_printf_check(nullptr, 1, &n, &str), AX_ERR_BAD_PRINTF);
}

} // namespace
