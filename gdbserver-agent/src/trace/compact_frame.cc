#include "trace/compact_frame.h"

#include <cstring>

#include "abi/amd64_regs.h"
#include "abi/tframe.h"
#include "trace/collector.h"
#include "trace/frame.h"

namespace gdbtrace {

CompactRegisters CompactRegisters::of(const std::vector<unsigned>& regnums) {
  CompactRegisters c;
  for (unsigned r : regnums) {
    uint8_t size = uint8_t(gt_reg_size(r));
    uint8_t stride = size < 8 ? 8 : size;
    if (r < GT_NUM_REGS_AVX && c.slot_at_[r] < 0)
      c.slot_at_[r] = int16_t(c.block_size_ - 1);
    c.slots.push_back({uint16_t(gt_reg_offset(r)), size, stride});
    c.block_size_ += stride;
  }
  return c;
}

RegisterMask register_mask(const std::vector<bool>& held) {
  RegisterMask mask;
  for (size_t r = 0; r < held.size() && r < mask.size(); ++r)
    mask[r] = held[r];
  return mask;
}

CompactRegisters CompactRegisters::of_mask(const RegisterMask& held) {
  std::vector<unsigned> regnums;
  for (unsigned r = 0; r < held.size(); ++r)
    if (held[r])
      regnums.push_back(r);
  return of(regnums);
}

bool expand_frame(std::span<const uint8_t> compact, const CompactRegisters& regs,
                  uint32_t regblock_size, std::vector<uint8_t>& out) {
  out.clear();
  if (compact.size() < GT_TFRAME_HEADER_SIZE)
    return false;
  uint32_t data_size = gt_tframe_size(compact.data());
  if (data_size > compact.size() - GT_TFRAME_HEADER_SIZE)
    return false;
  out.insert(out.end(), compact.begin(), compact.begin() + GT_TFRAME_HEADER_SIZE);
  const uint8_t* p = compact.data() + GT_TFRAME_HEADER_SIZE;
  const uint8_t* end = p + data_size;
  while (p < end) {
    size_t left = size_t(end - p);
    size_t block = 0;
    switch (*p) {
    case GT_TFRAME_COMPACT_REGS: {
      block = regs.block_size();
      if (left < block)
        return false;
      size_t at = out.size();
      out.resize(at + GT_TFRAME_REGS_HEADER + regblock_size, 0);
      out[at] = GT_TFRAME_REGS;
      uint8_t* dst = out.data() + at + GT_TFRAME_REGS_HEADER;
      const uint8_t* src = p + 1;
      for (const auto& s : regs.slots) {
        if (s.offset + s.size <= regblock_size) {
          if (s.size == 8) // most registers: one load and store, not a memcpy call
            std::memcpy(dst + s.offset, src, 8);
          else
            std::memcpy(dst + s.offset, src, s.size);
        }
        src += s.stride;
      }
      p += block;
      continue;
    }
    case GT_TFRAME_MEM:
      if (left < GT_TFRAME_MEM_HEADER)
        return false;
      block = GT_TFRAME_MEM_HEADER + get_le<uint16_t>(p + GT_TFRAME_MEM_LEN_OFFSET);
      break;
    case GT_TFRAME_TSV:
      block = GT_TFRAME_TSV_SIZE;
      break;
    default: // a compact frame has no 'R' block: anything else is damage
      return false;
    }
    if (left < block)
      return false;
    out.insert(out.end(), p, p + block);
    p += block;
  }
  uint32_t n = uint32_t(out.size() - GT_TFRAME_HEADER_SIZE);
  std::memcpy(out.data() + GT_TFRAME_SIZE_OFFSET, &n, 4);
  return true;
}

size_t compact_size(size_t frame_size, size_t register_blocks, const CompactRegisters& regs,
                    uint32_t regblock_size) {
  return frame_size - register_blocks * (GT_TFRAME_REGS_HEADER + regblock_size) +
         register_blocks * regs.block_size();
}

void compact_frame(std::span<const uint8_t> frame, const CompactRegisters& regs,
                   uint32_t regblock_size, uint8_t* out) {
  uint8_t* start = out;
  std::memcpy(out, frame.data(), GT_TFRAME_HEADER_SIZE);
  out += GT_TFRAME_HEADER_SIZE;
  FrameView(frame, regblock_size).for_each([&](const FrameBlock& b) {
    if (b.type != GT_TFRAME_REGS) {
      std::memcpy(out, b.raw.data(), b.raw.size());
      out += b.raw.size();
      return true;
    }
    *out = GT_TFRAME_COMPACT_REGS;
    uint8_t* slot = out + 1;
    for (const auto& s : regs.slots) {
      std::memset(slot, 0, s.stride);
      if (s.offset + s.size <= regblock_size)
        std::memcpy(slot, b.data + s.offset, s.size);
      slot += s.stride;
    }
    out += regs.block_size();
    return true;
  });
  uint32_t n = uint32_t(out - start - GT_TFRAME_HEADER_SIZE);
  std::memcpy(start + GT_TFRAME_SIZE_OFFSET, &n, 4);
}

// A context that does not store compact frames (a test's) gets the tfile frame;
// one that does not expand goes in as it is, to be counted malformed.
bool TraceContext::append_compact_frame(std::span<const uint8_t> frame,
                                        const RegisterMask& registers, uint64_t address) {
  std::vector<uint8_t> tfile;
  if (!expand_frame(frame, CompactRegisters::of_mask(registers), register_block_size(), tfile))
    return append_frame(frame, address);
  return append_frame(tfile, address);
}

} // namespace gdbtrace
