#include "trace/ring_merge.h"

#include <algorithm>

namespace gdbtrace {

void RingMerge::begin(std::span<const uint64_t> start) {
  records_.clear();
  runs_.clear();
  runs_sorted_ = true;
  freed_.assign(start.begin(), start.end());
  scanned_.assign(start.begin(), start.end());
  pending_.assign(start.size(), 0);
}

// A ring is written in hit order, nearly always: its records come as sorted
// runs, one per ring, and merging adjacent runs (as a bottom-up merge sort
// does) is O(n log runs) where a stable sort of the whole pass was O(n log n):
// the sort was ~6 % of the stub's CPU per streamed frame (perf, 4 threads on
// 2 CPUs). A ring out of order (a sleepable program preempted between its
// stamp and its reservation) takes the sort. Both keep records with the same
// order in the order they were added.
void RingMerge::sort() {
  auto by_order = [](const Record& a, const Record& b) { return a.order < b.order; };
  if (!runs_sorted_) {
    std::stable_sort(records_.begin(), records_.end(), by_order);
    return;
  }
  std::vector<size_t>& bounds = runs_; // run starts, then the end
  bounds.push_back(records_.size());
  auto at = [&](size_t i) { return records_.begin() + long(bounds[i]); };
  while (bounds.size() > 2) {
    size_t kept = 0;
    for (size_t i = 0; i + 1 < bounds.size(); i += 2) {
      if (i + 2 < bounds.size())
        std::inplace_merge(at(i), at(i + 1), at(i + 2), by_order);
      bounds[kept++] = bounds[i];
    }
    bounds[kept++] = records_.size();
    bounds.resize(kept);
  }
}

} // namespace gdbtrace
