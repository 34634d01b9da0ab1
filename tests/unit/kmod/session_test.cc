// Host-side checks of the module collector that need no kernel module (the
// host kernel has no module support; the QEMU harness tests the rest).
#include <gtest/gtest.h>

#include <asio/io_context.hpp>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

#include "kmod/module_collector.h"
#include "trace/collector_probe_site.h"

extern "C" int kmod_site_test_fn() {
  return 7;
}

TEST(KmodCollector, AbsentDeviceIsAClearError) {
  struct stat st;
  if (::stat("/dev/gdbtrace", &st) == 0)
    GTEST_SKIP() << "gdbtrace.ko is loaded here";
  asio::io_context io;
  auto c = gdbtrace::make_module_collector(io);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("/dev/gdbtrace"), std::string::npos) << c.error().message;
  EXPECT_NE(c.error().message.find("not loaded"), std::string::npos) << c.error().message;
}

TEST(KmodProbeSite, ResolvesOwnFunctionToFileOffset) {
  auto addr = reinterpret_cast<uint64_t>(&kmod_site_test_fn);
  auto site = gdbtrace::resolve_probe_site(::getpid(), addr);
  ASSERT_TRUE(site.ok()) << site.error().message;
  // The file holds the same bytes at that offset as memory at the address.
  uint8_t file_bytes[8], mem_bytes[8];
  ASSERT_EQ(::pread(site->fd.get(), file_bytes, 8, off_t(site->offset)), 8);
  std::memcpy(mem_bytes, reinterpret_cast<const void*>(addr), 8);
  EXPECT_EQ(std::memcmp(file_bytes, mem_bytes, 8), 0);
}

TEST(KmodProbeSite, RejectsStackAndUnmapped) {
  int local = 0;
  auto s = gdbtrace::resolve_probe_site(::getpid(), reinterpret_cast<uint64_t>(&local));
  EXPECT_FALSE(s.ok());
  auto u = gdbtrace::resolve_probe_site(::getpid(), 0x10);
  EXPECT_FALSE(u.ok());
}
