#include "trace/ring_merge.h"

#include <algorithm>

namespace gdbtrace {

void RingMerge::begin(std::span<const uint64_t> start) {
  records_.clear();
  freed_.assign(start.begin(), start.end());
  scanned_.assign(start.begin(), start.end());
  pending_.assign(start.size(), 0);
}

void RingMerge::sort() {
  std::stable_sort(records_.begin(), records_.end(),
                   [](const Record& a, const Record& b) { return a.order < b.order; });
}

} // namespace gdbtrace
