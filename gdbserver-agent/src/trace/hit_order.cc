#include "trace/hit_order.h"

namespace gdbtrace {

void HitOrder::hold(std::span<const uint8_t> frame, const RegisterMask* compact, uint64_t address,
                    uint64_t hit_ns) {
  int mask = -1;
  if (compact) {
    // A drain's compact frames share a few masks (one per probe): keep each once.
    auto same = std::find(masks_.begin(), masks_.end(), *compact);
    mask = int(same - masks_.begin());
    if (same == masks_.end())
      masks_.push_back(*compact);
  }
  held_.push_back({hit_ns, bytes_.size(), uint32_t(frame.size()), mask, address});
  bytes_.insert(bytes_.end(), frame.begin(), frame.end());
}

} // namespace gdbtrace
