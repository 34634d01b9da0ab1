// The drain of per-CPU rings, common to the kernel collectors (eBPF ring
// buffers, the module's mmap()ed rings): frames of one thread can sit in
// several rings (it migrated between hits), so a drain gathers what every ring
// holds, hands the records out in hit order (the eBPF stamp, the module's
// sequence number), and then frees each ring up to what was handed out.
// The rings' own record formats stay with their collectors; this is only the
// merge, so both hand frames to the engine in the same order by the same rule.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace gdbtrace {

class RingMerge {
public:
  // Starts a drain of RINGS rings; each ring's free position is START[r] until
  // records of it are handed out.
  void begin(std::span<const uint64_t> start);
  // A record of RING at AT (LEN bytes, which stay valid until hand_out()
  // returns), ORDER its place in hit order; the ring may be freed up to
  // NEXT_POS once it is handed out.
  void add(uint32_t ring, uint64_t order, const uint8_t* at, uint32_t len, uint64_t next_pos) {
    if (records_.empty() || records_.back().ring != ring)
      runs_.push_back(records_.size()); // a run of one ring's records starts
    else if (records_.back().order > order)
      runs_sorted_ = false;
    records_.push_back({order, at, next_pos, ring, len});
    pending_[ring]++;
  }
  // Everything of RING before END_POS was looked at (pads, discarded records):
  // once its records are all handed out, the ring is freed up to there.
  void scanned(uint32_t ring, uint64_t end_pos) { scanned_[ring] = end_pos; }
  // Hands the records to FN (span, order) in hit order (records with the same order keep the
  // order they were added in); stops early when FN returns false, or at the
  // first record whose order is past MAX_ORDER (a drain that looked at part of
  // a ring: what that ring holds further on may come before the rest). Returns
  // how many FN took.
  // (A template: the drain is per frame, so no std::function in between.)
  template <class Fn> size_t hand_out(Fn&& fn, uint64_t max_order = UINT64_MAX) {
    sort();
    size_t taken = 0;
    for (size_t i = 0; i < records_.size(); i++) {
      // In hit order the records jump between rings, and a pass's scan read
      // only their first lines, long enough ago to be out of this core's
      // cache: the frames' other lines were a third of the engine's time.
      if (i + kPrefetchAhead < records_.size())
        prefetch(records_[i + kPrefetchAhead]);
      const Record& r = records_[i];
      if (r.order > max_order || !fn(std::span<const uint8_t>(r.at, r.len), r.order))
        break;
      freed_[r.ring] = r.next_pos;
      pending_[r.ring]--;
      taken++;
    }
    return taken;
  }
  // Where ring R may be freed up to after hand_out().
  uint64_t free_to(uint32_t r) const { return pending_[r] ? freed_[r] : scanned_[r]; }
  size_t rings() const { return freed_.size(); }

private:
  void sort();
  struct Record {
    uint64_t order;
    const uint8_t* at;
    uint64_t next_pos;
    uint32_t ring;
    uint32_t len;
  };
  static constexpr size_t kPrefetchAhead = 4; // records: ~0.5 us of the drain's work
  static void prefetch(const Record& r) {
    for (uint32_t off = 0; off < r.len; off += 64)
      __builtin_prefetch(r.at + off);
  }
  std::vector<Record> records_;
  // Where each run of consecutive records of one ring starts, and whether
  // every run is in hit order (sort() then merges the runs).
  std::vector<size_t> runs_;
  bool runs_sorted_ = true;
  std::vector<uint64_t> freed_, scanned_;
  std::vector<uint32_t> pending_; // records of each ring not handed out yet
};

} // namespace gdbtrace
