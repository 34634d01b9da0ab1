// The pads' TSC stamps converted to CLOCK_MONOTONIC, the clock of the eBPF
// stamps the engine orders them against (trace/hit_order.h).
#include "jumppad/tsc_clock.h"

#include <chrono>
#include <ctime>
#include <gtest/gtest.h>
#include <thread>
#include <x86intrin.h>

namespace gdbtrace::jumppad {
namespace {

uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

TEST(TscClock, StampsConvertToTheMonotonicClock) {
  TscClock clock;
  clock.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  uint64_t before_ns = monotonic_ns();
  uint64_t stamp = __rdtsc();
  uint64_t after_ns = monotonic_ns();
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  clock.sample(); // a drain after the stamp
  uint64_t converted = clock.to_monotonic_ns(stamp);
  // Within a microsecond of the bracket: the order against a uprobe hit (~1 us) holds.
  EXPECT_GE(converted + 1000, before_ns);
  EXPECT_LE(converted, after_ns + 1000);
  // Later stamps convert later (a stamp newer than the last pair extrapolates).
  uint64_t later = __rdtsc();
  EXPECT_GT(clock.to_monotonic_ns(later), converted);
}

} // namespace
} // namespace gdbtrace::jumppad
