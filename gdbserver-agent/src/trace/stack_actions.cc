#include "trace/stack_actions.h"

#include <algorithm>
#include <cerrno>

#include "abi/amd64_regs.h"

namespace gdbtrace {

namespace {
constexpr uint32_t kMinPiece = 512;
constexpr uint32_t kMaxPieces = 32;
} // namespace

Result<uint32_t> check_stack_bytes(uint64_t bytes) {
  if (bytes < kMinStackBytes || bytes > kMaxStackBytes)
    return make_error(EINVAL, "stack snapshot size must be " + std::to_string(kMinStackBytes) +
                                  ".." + std::to_string(kMaxStackBytes) + " bytes");
  return uint32_t(bytes);
}

uint32_t stack_piece_size(uint32_t bytes) {
  uint32_t piece = (bytes + kMaxPieces - 1) / kMaxPieces;
  piece = (piece + 63) / 64 * 64; // whole cache lines
  return std::max(piece, kMinPiece);
}

Tracepoint with_stack_actions(const Tracepoint& tp, uint32_t bytes) {
  Tracepoint out = tp;
  bool has_registers = std::any_of(tp.actions.begin(), tp.actions.end(), [](const TraceAction& a) {
    return std::holds_alternative<CollectRegisters>(a);
  });
  if (!has_registers) {
    // What unwinding reads: the general registers, rip and eflags. Not the
    // x87/SSE/AVX state, which a kernel collector would save at every hit.
    CollectRegisters regs;
    regs.mask.assign((GT_NUM_REGS_AVX + 7) / 8, 0);
    for (unsigned r = 0; r <= GT_EFLAGS; r++)
      regs.mask[r / 8] |= uint8_t(1u << (r % 8));
    out.actions.push_back(regs);
  }
  uint32_t piece = stack_piece_size(bytes);
  for (uint32_t done = 0; done < bytes; done += piece) {
    CollectMemory m;
    m.basereg = GT_RSP;
    m.offset = done;
    m.length = std::min(piece, bytes - done);
    m.stack = true;
    out.actions.push_back(m);
  }
  return out;
}

} // namespace gdbtrace
