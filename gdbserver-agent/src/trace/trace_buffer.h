// The trace buffer: frames stored back to back exactly as gdb's tfile holds
// them (see frame.h), so qTBuffer / qGdbtrace.frames / tsave are byte copies.
//
// Linear mode refuses a frame that does not fit (the run then stops with
// tfull); circular mode discards the oldest frames to make room. Alongside the
// bytes it keeps a frame index: frame number -> offset (O(1)), and per
// tracepoint and per pc sorted sequence lists, so every tfind form is a binary
// search instead of a walk from the first frame.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <span>
#include <unordered_map>
#include <vector>

namespace gdbtrace {

class TraceBuffer {
public:
  static constexpr size_t kDefaultSize = 5 * 1024 * 1024; // gdbserver's default

  explicit TraceBuffer(size_t capacity = kDefaultSize) : capacity_(capacity) {}

  void clear();
  // Called at QTStart: reserves the whole buffer so appends never reallocate,
  // and prepares its first pages (prepare_at_start).
  void reserve_for_run();
  void set_capacity(size_t bytes); // also clears
  void set_circular(bool circular) { circular_ = circular; }
  bool circular() const { return circular_; }

  // Appends FRAME (a complete tfile frame). PC is the address tfind pc/range
  // use for it. False when it cannot be stored (linear buffer full, or a frame
  // larger than the whole buffer).
  bool append(std::span<const uint8_t> frame, uint16_t tp_number, uint64_t pc);

  size_t capacity() const { return capacity_; }
  size_t used() const { return store_.size() - start_; }
  size_t free_bytes() const { return capacity_ - used(); }
  size_t frame_count() const { return metas_.size(); }
  uint64_t frames_created() const { return created_; }
  uint64_t frames_discarded() const { return discarded_; }

  // The whole frame stream, oldest frame first.
  std::span<const uint8_t> bytes() const {
    return {store_.data() + start_, store_.size() - start_};
  }
  // Frame N (0 = oldest present); empty span when out of range.
  std::span<const uint8_t> frame(long n) const;
  uint16_t frame_tp(long n) const { return metas_[size_t(n)].tp; }
  uint64_t frame_pc(long n) const { return metas_[size_t(n)].pc; }

  // The first frame after frame AFTER (-1: from the start) that matches; -1 if none.
  long find_tracepoint(uint16_t tp_number, long after) const;
  long find_pc(uint64_t pc, long after) const { return find_range(pc, pc, true, after); }
  // INSIDE: lo <= pc <= hi; otherwise pc < lo || pc > hi (gdb's tfind outside).
  long find_range(uint64_t lo, uint64_t hi, bool inside, long after) const;

private:
  struct Meta {
    uint64_t offset; // logical stream offset (store_ index + base_)
    uint32_t size;
    uint16_t tp;
    uint64_t pc;
  };
  using SeqList = std::deque<uint64_t>; // ascending frame sequence numbers

  void drop_oldest();
  void populate_ahead(size_t end);
  void prepare_at_start();
  long first_in(const SeqList& list, uint64_t from_seq) const;

  size_t capacity_;
  bool circular_ = false;
  std::vector<uint8_t> store_;
  size_t start_ = 0;       // store_ index of the oldest frame
  uint64_t base_ = 0;      // logical offset of store_[0]
  std::deque<Meta> metas_; // metas_[n] = frame number n
  uint64_t first_seq_ = 0; // sequence number of frame 0
  uint64_t created_ = 0;
  uint64_t discarded_ = 0;
  // Pages of store_'s reservation made present in batches ahead of the write
  // position (see populate_ahead): [store_.data(), populated_end_).
  const uint8_t* populated_base_ = nullptr;
  size_t populated_end_ = 0;
  bool populate_works_ = true;
  std::unordered_map<uint16_t, SeqList> by_tp_;
  std::map<uint64_t, SeqList> by_pc_;
};

} // namespace gdbtrace
