#include "trace/seq_list.h"

#include <algorithm>

#include "common/populate.h"

namespace gdbtrace {

void SeqList::push_back(uint64_t seq) {
  if (empty()) {
    seqs_.clear();
    head_ = 0;
    base_ = seq;
  } else if (seq - base_ > kMaxSpan) {
    compact();
  }
  if (seqs_.size() >= prepared_ && seqs_.size() >= kPreparedGrowth)
    prepare();
  seqs_.push_back(uint32_t(seq - base_));
}

// A long list's storage is made present a batch ahead of its pushes, and a
// doubling's copy goes into storage made present first: faulted in a page at
// a time, they were ~15 % of the stub's CPU a frame in a 2-thread drain of
// 1.2 M frames into a 1 GB buffer (perf; one site's list of 4.8 MB). In
// batches, not the whole doubled storage at once: that stalled the drain for
// milliseconds at each doubling, while 1 MB rings filled.
void SeqList::prepare() {
  constexpr size_t kBatch = (64 << 10) / sizeof(uint32_t);
  if (seqs_.size() == seqs_.capacity()) {
    std::vector<uint32_t> bigger;
    bigger.reserve(2 * seqs_.capacity());
    populate_for_write(bigger.data(), bigger.data() + seqs_.size() + kBatch);
    bigger.assign(seqs_.begin(), seqs_.end());
    seqs_.swap(bigger);
  } else {
    populate_for_write(seqs_.data() + seqs_.size(),
                       seqs_.data() + std::min(seqs_.capacity(), seqs_.size() + kBatch));
  }
  prepared_ = std::min(seqs_.capacity(), seqs_.size() + kBatch);
}

void SeqList::compact() {
  const uint32_t first = empty() ? 0 : seqs_[head_];
  seqs_.erase(seqs_.begin(), seqs_.begin() + long(head_)); // in place: no allocation per pass
  for (uint32_t& s : seqs_)
    s -= first;
  base_ += first;
  head_ = 0;
}

std::optional<uint64_t> SeqList::first_from(uint64_t seq) const {
  if (seq > base_ && seq - base_ > kMaxSpan)
    return std::nullopt;
  uint32_t rel = seq > base_ ? uint32_t(seq - base_) : 0;
  auto it = std::lower_bound(seqs_.begin() + long(head_), seqs_.end(), rel);
  if (it == seqs_.end())
    return std::nullopt;
  return base_ + *it;
}

} // namespace gdbtrace
