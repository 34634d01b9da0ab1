// One trace frame in gdb's tfile / gdbserver layout (abi/tframe.h describes it).
// FrameBuilder writes one; FrameView walks one. Every C++ reader of frames goes
// through FrameView.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "abi/tframe.h"

namespace gdbtrace {

constexpr size_t kFrameHeaderSize = GT_TFRAME_HEADER_SIZE;

template <typename T> void put_le(std::vector<uint8_t>& out, T v) {
  uint8_t b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T)); // x86-64 only: host order is the tfile's order
  out.insert(out.end(), b, b + sizeof(T));
}

template <typename T> T get_le(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

class FrameBuilder {
public:
  explicit FrameBuilder(uint16_t tp_number) { reset(tp_number); }
  // Starts another frame, keeping the buffer (a collector building one frame
  // after another allocates once).
  void reset(uint16_t tp_number) {
    bytes_.clear();
    put_le<uint16_t>(bytes_, tp_number);
    put_le<uint32_t>(bytes_, 0);
  }
  void add_registers(std::span<const uint8_t> block) {
    bytes_.push_back(GT_TFRAME_REGS);
    bytes_.insert(bytes_.end(), block.begin(), block.end());
  }
  // A compact register block ('r'): SLOTS in the layout of a CompactRegisters,
  // for TraceContext::append_compact_frame.
  void add_compact_registers(std::span<const uint8_t> slots) {
    bytes_.push_back(GT_TFRAME_COMPACT_REGS);
    bytes_.insert(bytes_.end(), slots.begin(), slots.end());
  }
  // Memory blocks hold at most 65535 bytes (u16 length); longer ranges are split.
  void add_memory(uint64_t address, std::span<const uint8_t> data) {
    while (!data.empty()) {
      size_t n = std::min<size_t>(data.size(), GT_TFRAME_MEM_MAX);
      bytes_.push_back(GT_TFRAME_MEM);
      put_le<uint64_t>(bytes_, address);
      put_le<uint16_t>(bytes_, uint16_t(n));
      bytes_.insert(bytes_.end(), data.begin(), data.begin() + n);
      data = data.subspan(n);
      address += n;
    }
  }
  void add_tsv(uint32_t number, int64_t value) {
    bytes_.push_back(GT_TFRAME_TSV);
    put_le<uint32_t>(bytes_, number);
    put_le<int64_t>(bytes_, value);
  }
  size_t size() const { return bytes_.size(); }
  // The finished frame (size field filled in).
  std::span<const uint8_t> finish() {
    uint32_t n = uint32_t(bytes_.size() - kFrameHeaderSize);
    std::memcpy(bytes_.data() + GT_TFRAME_SIZE_OFFSET, &n, 4);
    return bytes_;
  }

private:
  std::vector<uint8_t> bytes_;
};

struct FrameBlock {
  char type = 0;                 // 'R', 'M', 'V', 'r' (compact registers)
  const uint8_t* data = nullptr; // R, r: register bytes; M: memory bytes
  uint64_t address = 0;          // M
  uint32_t length = 0;           // R, r: block size (tag excluded); M: byte count
  uint32_t tsv = 0;              // V
  int64_t value = 0;             // V
  std::span<const uint8_t> raw;  // the whole block, its tag included
};

// A view of one frame's blocks. REGBLOCK_SIZE is needed to step over 'R';
// COMPACT_SIZE, the size of a compact register block (compact_frame.h, tag
// included), to step over 'r': 0 when the frame has none (an 'r' is damage).
class FrameView {
public:
  FrameView(std::span<const uint8_t> frame, uint32_t regblock_size, uint32_t compact_size = 0)
      : frame_(frame), regblock_size_(regblock_size), compact_size_(compact_size) {}
  // A frame shorter than its header has tracepoint 0 and no blocks.
  bool has_header() const { return frame_.size() >= kFrameHeaderSize; }
  uint16_t tp_number() const { return has_header() ? gt_tframe_tp(frame_.data()) : 0; }
  uint32_t data_size() const { return has_header() ? gt_tframe_size(frame_.data()) : 0; }
  // Header plus blocks; larger than the span when the frame is truncated.
  size_t total_size() const { return kFrameHeaderSize + size_t(data_size()); }
  // Calls FN (bool(const FrameBlock&): false stops the walk) for each block in
  // order; false when the frame is malformed. A template, not std::function:
  // the engine walks every drained frame two or three times, and the indirect
  // call per block was ~6 % of a streamed frame's drain.
  template <class Fn> bool for_each(Fn&& fn) const {
    if (!has_header() || total_size() > frame_.size())
      return false;
    const uint8_t* p = frame_.data() + kFrameHeaderSize;
    const uint8_t* end = p + data_size();
    while (p < end) {
      const uint8_t* tag = p; // block fields are at fixed offsets from the tag
      size_t left = size_t(end - tag);
      FrameBlock b;
      b.type = char(*tag);
      switch (b.type) {
      case GT_TFRAME_REGS:
        if (left < GT_TFRAME_REGS_HEADER + regblock_size_)
          return false;
        b.data = tag + GT_TFRAME_REGS_HEADER;
        b.length = regblock_size_;
        p = b.data + b.length;
        break;
      case GT_TFRAME_COMPACT_REGS:
        if (compact_size_ == 0 || left < compact_size_)
          return false;
        b.data = tag + 1;
        b.length = compact_size_ - 1;
        p = b.data + b.length;
        break;
      case GT_TFRAME_MEM:
        if (left < GT_TFRAME_MEM_HEADER)
          return false;
        b.address = get_le<uint64_t>(tag + GT_TFRAME_MEM_ADDR_OFFSET);
        b.length = get_le<uint16_t>(tag + GT_TFRAME_MEM_LEN_OFFSET);
        if (left - GT_TFRAME_MEM_HEADER < b.length)
          return false;
        b.data = tag + GT_TFRAME_MEM_HEADER;
        p = b.data + b.length;
        break;
      case GT_TFRAME_TSV:
        if (left < GT_TFRAME_TSV_SIZE)
          return false;
        b.tsv = get_le<uint32_t>(tag + GT_TFRAME_TSV_NUM_OFFSET);
        b.value = get_le<int64_t>(tag + GT_TFRAME_TSV_VALUE_OFFSET);
        p = tag + GT_TFRAME_TSV_SIZE;
        break;
      default:
        return false;
      }
      b.raw = {tag, size_t(p - tag)};
      if (!fn(b))
        return true;
    }
    return true;
  }
  // The first register block, 'R' or 'r'.
  std::optional<FrameBlock> registers() const {
    std::optional<FrameBlock> out;
    for_each([&](const FrameBlock& b) {
      if (b.type != GT_TFRAME_REGS && b.type != GT_TFRAME_COMPACT_REGS)
        return true;
      out = b;
      return false;
    });
    return out;
  }

private:
  std::span<const uint8_t> frame_;
  uint32_t regblock_size_;
  uint32_t compact_size_;
};

} // namespace gdbtrace
