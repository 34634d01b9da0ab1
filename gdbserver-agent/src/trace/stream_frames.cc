#include "trace/stream_frames.h"

#include <cstring>

#include "abi/amd64_regs.h"
#include "abi/tframe.h"
#include "trace/frame.h"

namespace gdbtrace {

CutPlan CutPlan::make(const std::vector<bool>& present, const CompactRegisters* layout,
                      const RegisterLayout& regs, uint32_t regblock_size) {
  CutPlan plan;
  plan.compact = layout != nullptr;
  plan.in_size = layout ? layout->block_size() : GT_TFRAME_REGS_HEADER + regblock_size;
  uint16_t to = 0;
  for (unsigned r = 0; r < present.size(); ++r) {
    if (!present[r])
      continue;
    uint16_t size = uint16_t(regs.size(r));
    int32_t from = layout ? layout->slot_offset(r) : int32_t(regs.offset(r));
    if (!layout && regs.offset(r) + size > regblock_size)
      from = -1;
    // Registers next to each other in both blocks (or missing from both) go
    // as one copy: a streamed frame used to take ~20 8-byte copies, each a
    // branch, for what is mostly one run.
    CutPlan::Copy* last = plan.copies.empty() ? nullptr : &plan.copies.back();
    if (last && last->to + last->size == to &&
        (from < 0 ? last->from < 0 : last->from >= 0 && last->from + last->size == from))
      last->size = uint16_t(last->size + size);
    else
      plan.copies.push_back({from, to, size});
    to = uint16_t(to + size);
  }
  return plan;
}

// A hand walk of the blocks, not FrameView: this runs once per streamed frame.
void append_cut_frame(std::span<const uint8_t> stored, const CutPlan& plan, uint32_t cut_size,
                      std::vector<uint8_t>& out) {
  size_t start = out.size();
  out.insert(out.end(), stored.begin(), stored.begin() + GT_TFRAME_HEADER_SIZE);
  const uint8_t* p = stored.data() + GT_TFRAME_HEADER_SIZE;
  const uint8_t* end = stored.data() + stored.size();
  const uint8_t regs_tag = plan.compact ? GT_TFRAME_COMPACT_REGS : GT_TFRAME_REGS;
  while (p < end) {
    size_t block;
    if (*p == regs_tag) {
      size_t at = out.size();
      out.resize(at + GT_TFRAME_REGS_HEADER + cut_size);
      uint8_t* dst = out.data() + at;
      *dst++ = GT_TFRAME_REGS;
      const uint8_t* src = p + 1;
      for (const auto& c : plan.copies) {
        if (c.from < 0)
          std::memset(dst + c.to, 0, c.size);
        else if (c.size == 8)
          std::memcpy(dst + c.to, src + c.from, 8);
        else
          std::memcpy(dst + c.to, src + c.from, c.size);
      }
      p += plan.in_size;
      continue;
    }
    if (*p == GT_TFRAME_MEM)
      block = GT_TFRAME_MEM_HEADER + get_le<uint16_t>(p + GT_TFRAME_MEM_LEN_OFFSET);
    else // GT_TFRAME_TSV: the buffer holds no other block
      block = GT_TFRAME_TSV_SIZE;
    out.insert(out.end(), p, p + block);
    p += block;
  }
  uint32_t n = uint32_t(out.size() - start - GT_TFRAME_HEADER_SIZE);
  std::memcpy(out.data() + start + GT_TFRAME_SIZE_OFFSET, &n, 4);
}

} // namespace gdbtrace
