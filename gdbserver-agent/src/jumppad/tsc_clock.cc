#include "jumppad/tsc_clock.h"

#include <ctime>
#include <x86intrin.h>

namespace gdbtrace::jumppad {

// The TSC read on both sides of clock_gettime, the tightest of a few tries:
// a preemption between the reads would put the pair microseconds off.
TscClock::Pair TscClock::read() {
  Pair best;
  uint64_t best_gap = UINT64_MAX;
  for (int i = 0; i < 4; i++) {
    timespec ts{};
    uint64_t before = __rdtsc();
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t after = __rdtsc();
    if (after - before < best_gap) {
      best_gap = after - before;
      best = {before + (after - before) / 2,
              uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec)};
    }
  }
  return best;
}

void TscClock::start() {
  first_ = last_ = read();
}

void TscClock::sample() {
  last_ = read();
  if (!first_.tsc)
    first_ = last_;
}

uint64_t TscClock::to_monotonic_ns(uint64_t tsc) const {
  if (last_.tsc <= first_.tsc)
    return last_.ns; // no interval to take a rate from yet: every stamp is "now"
  double ns_per_tick = double(last_.ns - first_.ns) / double(last_.tsc - first_.tsc);
  double ago = (double(last_.tsc) - double(tsc)) * ns_per_tick; // negative: after the pair
  double ns = double(last_.ns) - ago;
  return ns <= 0 ? 0 : uint64_t(ns);
}

} // namespace gdbtrace::jumppad
