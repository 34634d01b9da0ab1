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
