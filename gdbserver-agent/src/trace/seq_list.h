// Ascending frame sequence numbers (the trace buffer's per-site tfind index),
// 4 bytes each: 32 bits above a base.
//
// A vector with a moving start rather than a std::deque: a deque takes a
// 512-byte block per list, which with thousands of tracepoints was most of
// the tfind index. Popping the front (circular buffers) compacts once half of
// it is dead: amortised O(1).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace gdbtrace {

class SeqList {
public:
  // Live numbers (pushed, not popped) span less than this; the trace buffer
  // holds fewer frames at once.
  static constexpr uint64_t kMaxSpan = 0xffffffffu;
  // Lists of this many numbers (64 KB) or more are pushed into storage made
  // present first (prepare()).
  static constexpr size_t kPreparedGrowth = 16384;

  // SEQ is above every number pushed before, and less than kMaxSpan above the
  // oldest live one.
  void push_back(uint64_t seq);
  void pop_front() {
    if (++head_ * 2 >= seqs_.size())
      compact();
  }
  bool empty() const { return head_ == seqs_.size(); }
  size_t size() const { return seqs_.size() - head_; }
  // The first live number >= SEQ, or none.
  std::optional<uint64_t> first_from(uint64_t seq) const;

private:
  void compact(); // drops the popped numbers; the base moves to the oldest live one
  void prepare();
  std::vector<uint32_t> seqs_;
  uint64_t base_ = 0;
  uint32_t head_ = 0;
  size_t prepared_ = 0; // seqs_' storage below this index is present (prepare())
};

} // namespace gdbtrace
