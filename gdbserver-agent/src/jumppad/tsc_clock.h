// The pads stamp their records with rdtscp's TSC (a few ns in the pad); the
// eBPF collector stamps with bpf_ktime_get_ns (CLOCK_MONOTONIC). The engine
// orders the frames of both by one clock, so the stub converts TSC stamps
// to CLOCK_MONOTONIC from (TSC, CLOCK_MONOTONIC) pairs it reads itself: one
// when the run's first pad goes in, one at each drain. The rate comes from the
// two pairs furthest apart, the offset from the newest, so a stamp taken since
// the last drain is off by its age times the rate's error (a pair is read
// within a few hundred TSC ticks: ~10^-5 over 10 ms, ~100 ns for a 10 ms old
// record), far below the microsecond a uprobe hit takes.
#pragma once

#include <cstdint>

namespace gdbtrace::jumppad {

class TscClock {
public:
  void start();  // the first pair (a run's first pad)
  void sample(); // the newest pair (a drain)
  uint64_t to_monotonic_ns(uint64_t tsc) const;

private:
  struct Pair {
    uint64_t tsc = 0, ns = 0;
  };
  static Pair read();
  Pair first_, last_;
};

} // namespace gdbtrace::jumppad
