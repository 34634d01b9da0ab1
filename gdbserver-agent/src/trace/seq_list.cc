#include "trace/seq_list.h"

#include <algorithm>

namespace gdbtrace {

void SeqList::push_back(uint64_t seq) {
  if (empty()) {
    seqs_.clear();
    head_ = 0;
    base_ = seq;
  } else if (seq - base_ > kMaxSpan) {
    compact();
  }
  seqs_.push_back(uint32_t(seq - base_));
}

void SeqList::compact() {
  uint64_t first = empty() ? base_ : base_ + seqs_[head_];
  std::vector<uint32_t> live;
  live.reserve(seqs_.size() - head_);
  for (size_t i = head_; i < seqs_.size(); ++i)
    live.push_back(uint32_t(base_ + seqs_[i] - first));
  seqs_ = std::move(live);
  base_ = first;
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
