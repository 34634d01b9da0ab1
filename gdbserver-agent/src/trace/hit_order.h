// Frames held back during one drain of every collector, so that the engine
// numbers the frames of several collectors in the order they hit, as one
// buffer would have (gdbserver's): collectors drain one after another, and a
// `trace` on eBPF and an `ftrace` on the jump pad hit in one `continue` came
// out in drain order, which tfind's forward searches from frame 0 see (gdb's
// trace-break.exp). Only the collectors that stamp their hits with one clock
// (Collector::kStampsHits) are held; with one such collector in the run its
// frames, already in hit order, go straight to the buffer.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "trace/compact_frame.h"

namespace gdbtrace {

class HitOrder {
public:
  // A copy of FRAME (its register blocks compact blocks of *COMPACT, or tfile
  // blocks when null), collected at ADDRESS, hit at HIT_NS (CLOCK_MONOTONIC).
  void hold(std::span<const uint8_t> frame, const RegisterMask* compact, uint64_t address,
            uint64_t hit_ns);
  // Hands the held frames to FN(frame, compact, address) in hit order (equal
  // times in the order held) and forgets them.
  template <class Fn> void release(Fn&& fn) {
    std::stable_sort(held_.begin(), held_.end(),
                     [](const Held& a, const Held& b) { return a.hit_ns < b.hit_ns; });
    for (const Held& h : held_)
      fn(std::span<const uint8_t>(bytes_.data() + h.at, h.len),
         h.mask < 0 ? nullptr : &masks_[h.mask], h.address);
    held_.clear();
    bytes_.clear();
    masks_.clear();
  }
  bool empty() const { return held_.empty(); }

private:
  struct Held {
    uint64_t hit_ns;
    size_t at;
    uint32_t len;
    int mask; // index into masks_, -1: a tfile frame
    uint64_t address;
  };
  std::vector<Held> held_;
  std::vector<uint8_t> bytes_;
  std::vector<RegisterMask> masks_;
};

} // namespace gdbtrace
