// One trace frame in gdb's tfile / gdbserver layout (little endian, packed):
//   u16 tracepoint number, u32 size of the blocks that follow, then blocks
//   'R' + register block, 'M' + u64 address + u16 length + bytes, 'V' + u32 number + i64 value.
// FrameBuilder writes one; FrameView walks one.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <span>
#include <vector>

namespace gdbtrace {

constexpr size_t kFrameHeaderSize = 6;

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
  explicit FrameBuilder(uint16_t tp_number) {
    put_le<uint16_t>(bytes_, tp_number);
    put_le<uint32_t>(bytes_, 0);
  }
  void add_registers(std::span<const uint8_t> block) {
    bytes_.push_back('R');
    bytes_.insert(bytes_.end(), block.begin(), block.end());
  }
  // Memory blocks hold at most 65535 bytes (u16 length); longer ranges are split.
  void add_memory(uint64_t address, std::span<const uint8_t> data) {
    while (!data.empty()) {
      size_t n = std::min<size_t>(data.size(), 0xffff);
      bytes_.push_back('M');
      put_le<uint64_t>(bytes_, address);
      put_le<uint16_t>(bytes_, uint16_t(n));
      bytes_.insert(bytes_.end(), data.begin(), data.begin() + n);
      data = data.subspan(n);
      address += n;
    }
  }
  void add_tsv(uint32_t number, int64_t value) {
    bytes_.push_back('V');
    put_le<uint32_t>(bytes_, number);
    put_le<int64_t>(bytes_, value);
  }
  size_t size() const { return bytes_.size(); }
  // The finished frame (size field filled in).
  std::span<const uint8_t> finish() {
    uint32_t n = uint32_t(bytes_.size() - kFrameHeaderSize);
    std::memcpy(bytes_.data() + 2, &n, 4);
    return bytes_;
  }

private:
  std::vector<uint8_t> bytes_;
};

struct FrameBlock {
  char type = 0;                 // 'R', 'M', 'V'
  const uint8_t* data = nullptr; // R: register bytes; M: memory bytes
  uint64_t address = 0;          // M
  uint32_t length = 0;           // R: block size; M: byte count
  uint32_t tsv = 0;              // V
  int64_t value = 0;             // V
};

// A view of one frame's blocks. REGBLOCK_SIZE is needed to step over 'R'.
class FrameView {
public:
  FrameView(std::span<const uint8_t> frame, uint32_t regblock_size)
      : frame_(frame), regblock_size_(regblock_size) {}
  uint16_t tp_number() const { return get_le<uint16_t>(frame_.data()); }
  uint32_t data_size() const { return get_le<uint32_t>(frame_.data() + 2); }
  // Calls FN for each block in order; false when the frame is malformed.
  bool for_each(const std::function<bool(const FrameBlock&)>& fn) const {
    const uint8_t* p = frame_.data() + kFrameHeaderSize;
    const uint8_t* end = p + data_size();
    if (end > frame_.data() + frame_.size())
      return false;
    while (p < end) {
      FrameBlock b;
      b.type = char(*p++);
      switch (b.type) {
      case 'R':
        if (size_t(end - p) < regblock_size_)
          return false;
        b.data = p;
        b.length = regblock_size_;
        p += regblock_size_;
        break;
      case 'M':
        if (end - p < 10)
          return false;
        b.address = get_le<uint64_t>(p);
        b.length = get_le<uint16_t>(p + 8);
        p += 10;
        if (size_t(end - p) < b.length)
          return false;
        b.data = p;
        p += b.length;
        break;
      case 'V':
        if (end - p < 12)
          return false;
        b.tsv = get_le<uint32_t>(p);
        b.value = get_le<int64_t>(p + 4);
        p += 12;
        break;
      default:
        return false;
      }
      if (!fn(b))
        return true;
    }
    return true;
  }
  std::optional<FrameBlock> registers() const {
    std::optional<FrameBlock> out;
    for_each([&](const FrameBlock& b) {
      if (b.type != 'R')
        return true;
      out = b;
      return false;
    });
    return out;
  }

private:
  std::span<const uint8_t> frame_;
  uint32_t regblock_size_;
};

} // namespace gdbtrace
