// The register contents of one thread in the 'g' layout (see abi/amd64_regs.h).
//
// Used for live threads (target), for trace frames (the 'R' block is exactly
// these bytes) and as the register source of agent-expression evaluation.
#pragma once

#include <array>
#include <bitset>
#include <cstdint>
#include <cstring>

#include "abi/amd64_regs.h"

namespace gdbtrace {

struct RegisterBlock {
  std::array<uint8_t, GT_REGBLOCK_SIZE_AVX> bytes{};
  // Registers whose value is known. 'g' replies print unknown ones as "xx..."
  // so gdb shows <unavailable> instead of a made-up zero.
  std::bitset<GT_NUM_REGS_AVX> valid;

  uint64_t get_u64(unsigned regno) const {
    uint64_t v = 0;
    std::memcpy(&v, bytes.data() + gt_reg_offset(regno),
                gt_reg_size(regno) < 8 ? gt_reg_size(regno) : 8);
    return v;
  }
  void set_u64(unsigned regno, uint64_t v) {
    unsigned n = gt_reg_size(regno) < 8 ? gt_reg_size(regno) : 8;
    std::memcpy(bytes.data() + gt_reg_offset(regno), &v, n);
    valid.set(regno);
  }
  uint64_t pc() const { return get_u64(GT_RIP); }
};

} // namespace gdbtrace
