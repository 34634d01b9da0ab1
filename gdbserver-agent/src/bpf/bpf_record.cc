#include "bpf/bpf_record.h"

#include <cstring>

#include "abi/amd64_regs.h"
#include "abi/tframe.h"
#include "trace/frame.h"

namespace gdbtrace::bpf {

CompactRegisters CompactRegisters::of(const std::vector<unsigned>& regnums) {
  CompactRegisters c;
  for (unsigned r : regnums)
    c.slots.push_back({uint16_t(gt_reg_offset(r)), uint8_t(gt_reg_size(r))});
  return c;
}

bool expand_record(std::span<const uint8_t> record, const CompactRegisters& regs,
                   uint32_t regblock_size, std::vector<uint8_t>& out) {
  out.clear();
  if (record.size() < GT_TFRAME_HEADER_SIZE)
    return false;
  uint32_t data_size = gt_tframe_size(record.data());
  if (data_size > record.size() - GT_TFRAME_HEADER_SIZE)
    return false;
  out.insert(out.end(), record.begin(), record.begin() + GT_TFRAME_HEADER_SIZE);
  const uint8_t* p = record.data() + GT_TFRAME_HEADER_SIZE;
  const uint8_t* end = p + data_size;
  while (p < end) {
    size_t left = size_t(end - p);
    size_t block = 0;
    switch (*p) {
    case kCompactRegsTag: {
      block = regs.block_size();
      if (left < block)
        return false;
      size_t at = out.size();
      out.resize(at + GT_TFRAME_REGS_HEADER + regblock_size, 0);
      out[at] = GT_TFRAME_REGS;
      uint8_t* dst = out.data() + at + GT_TFRAME_REGS_HEADER;
      const uint8_t* src = p + 1;
      for (const auto& s : regs.slots) {
        if (s.offset + s.size <= regblock_size)
          std::memcpy(dst + s.offset, src, s.size);
        src += 8;
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
    default: // the programs write no 'R' block: anything else is damage
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

} // namespace gdbtrace::bpf
