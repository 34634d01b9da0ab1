// Host-side checks of the module collector that need no kernel module (the
// host kernel has no module support; the QEMU harness tests the rest). The
// probe-site resolver it shares with the eBPF collector is tested in
// tests/unit/trace/probe_site_test.cc.
#include <gtest/gtest.h>

#include <asio/io_context.hpp>
#include <sys/stat.h>

#include "../strict_skip.h"
#include "kmod/module_collector.h"

TEST(KmodCollector, AbsentDeviceIsAClearError) {
  struct stat st;
  if (::stat("/dev/gdbtrace", &st) == 0)
    GDBTRACE_SKIP("kmod-loaded") << "gdbtrace.ko is loaded here";
  asio::io_context io;
  auto c = gdbtrace::make_module_collector(io);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("/dev/gdbtrace"), std::string::npos) << c.error().message;
  EXPECT_NE(c.error().message.find("not loaded"), std::string::npos) << c.error().message;
}
