// The trace buffer: frames stored back to back, and the frame stream gdb
// reads from it.
//
// A frame is stored as the tfile frame it was given (frame.h), except that
// the register blocks of a frame whose registers are partly unavailable (a
// kernel collector's: no FPU state) are stored compactly (compact_frame.h),
// as append_compact receives them or as append makes them: a register-only
// eBPF frame takes 183 bytes instead of 823. Readers never see
// that: frame(), read_stream() and stream_size() give the tfile frames,
// expanded one at a time, and stream offsets (qTBuffer, qGdbtrace.frames)
// count the expanded bytes. capacity(), used() and free_bytes() count the
// stored bytes: what tstatus reports and what fills the buffer.
//
// Linear mode refuses a frame that does not fit (the run then stops with
// tfull); circular mode discards the oldest frames to make room. Alongside the
// bytes it keeps a frame index: frame number -> stored and expanded offsets
// (O(1); a stream offset -> its frame is a binary search), and a sorted list
// of frame sequence numbers per site (a tracepoint at one pc), so every tfind
// form is a binary search per site instead of a walk from the first frame.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <vector>

#include "common/populate.h"
#include "trace/compact_frame.h"
#include "trace/front_popped_vector.h"
#include "trace/seq_list.h"

namespace gdbtrace {

class TraceBuffer {
public:
  static constexpr size_t kDefaultSize = 5 * 1024 * 1024; // gdbserver's default

  explicit TraceBuffer(size_t capacity = kDefaultSize) : capacity_(capacity) {}
  TraceBuffer(const TraceBuffer&) = delete; // it holds the whole trace: never copied
  TraceBuffer& operator=(const TraceBuffer&) = delete;

  void clear();
  // Called at QTStart: reserves the whole buffer so appends never reallocate,
  // and prepares its first pages (prepare_at_start).
  void reserve_for_run();
  void set_capacity(size_t bytes); // also clears
  void set_circular(bool circular) { circular_ = circular; }
  bool circular() const { return circular_; }
  // Bytes of a frame's 'R' blocks (560 or 816); fixed while frames are held
  // (set at QTStart, which clears the buffer).
  void set_register_block_size(uint32_t bytes) { regblock_size_ = bytes; }
  uint32_t register_block_size() const { return regblock_size_; }

  // Register sets frames are stored with: HELD[r] = remote register r is
  // held (the others read as unavailable and are not stored). The number a
  // set gets stays valid for the buffer's life (clear() keeps the sets).
  static constexpr uint16_t kAllRegisters = 0xffff; // every register: stored as given
  uint16_t register_set(const RegisterMask& held);
  uint16_t register_set(const std::vector<bool>& held) { return register_set(register_mask(held)); }
  const std::vector<bool>& registers_of(uint16_t set) const { return sets_[set].held; }
  const CompactRegisters& layout_of(uint16_t set) const { return sets_[set].layout; }

  // Appends FRAME (a complete, well-formed tfile frame) whose 'R' blocks hold
  // the registers of SET. PC is the address tfind pc/range use for it. False
  // when it cannot be stored (linear buffer full, or a frame larger than the
  // whole buffer).
  bool append(std::span<const uint8_t> frame, uint16_t tp_number, uint64_t pc,
              uint16_t set = kAllRegisters);
  // The same for a well-formed compact frame whose register blocks are
  // compact blocks of SET's layout (as the eBPF ring records carry them):
  // stored as it is.
  bool append_compact(std::span<const uint8_t> frame, uint16_t tp_number, uint64_t pc,
                      uint16_t set);
  // The same, told how many compact register blocks FRAME holds (the engine
  // has walked it already).
  bool append_compact(std::span<const uint8_t> frame, uint16_t tp_number, uint64_t pc, uint16_t set,
                      size_t register_blocks);
  // For the stub's idle moments: makes one more batch of the reserved pages
  // present, up to kPreparedAhead beyond the frames, so that the appends of a
  // busy moment write prepared pages. False when there was nothing to do.
  bool prepare_idle();

  // Stored bytes: what the frames take of the capacity.
  size_t capacity() const { return capacity_; }
  size_t used() const { return store_.size() - start_; }
  size_t free_bytes() const { return capacity_ - used(); }
  size_t frame_count() const { return metas_.size(); }
  uint64_t frames_created() const { return created_; }
  uint64_t frames_discarded() const { return discarded_; }
  // Sequence number of frame 0 (frames created before it were discarded): a
  // frame's number in the run, which discards do not change.
  uint64_t first_sequence() const { return first_seq_; }
  // Stream offset of frame N (N = frame_count(): the stream's size).
  uint64_t frame_stream_offset(long n) const {
    return size_t(n) < metas_.size() ? metas_[size_t(n)].xoffset - metas_.front().xoffset
                                     : stream_size();
  }
  // Stored bytes of the frames before frame N: what discarding them frees.
  size_t stored_before(long n) const {
    return size_t(n) < metas_.size() ? size_t(metas_[size_t(n)].offset - metas_.front().offset)
                                     : used();
  }

  // The frame stream: the frames in tfile layout, oldest first. Its size, and
  // its bytes from OFFSET, at most LENGTH of them, handed to SINK in order, a
  // frame (or a run of frames stored as they are) at a time: the stream is
  // never built whole. SINK returns false to stop early.
  using Sink = std::function<bool(std::span<const uint8_t>)>;
  uint64_t stream_size() const;
  void read_stream(uint64_t offset, uint64_t length, const Sink& sink) const;

  // Frame N (0 = oldest present) in tfile layout: a view of the store, or of
  // SCRATCH when it was stored compactly. Empty when out of range.
  std::span<const uint8_t> frame(long n, std::vector<uint8_t>& scratch) const;
  uint16_t frame_tp(long n) const { return sites_[metas_[size_t(n)].site].tp; }
  // Bytes of frame N in the frame stream (its tfile size).
  size_t frame_stream_bytes(long n) const {
    return (size_t(n) + 1 < metas_.size() ? metas_[size_t(n) + 1].xoffset : next_xoffset_) -
           metas_[size_t(n)].xoffset;
  }
  uint64_t frame_pc(long n) const { return sites_[metas_[size_t(n)].site].pc; }
  // Frame N as stored, not expanded: its bytes, and the layout of its compact
  // register blocks (null: its register blocks are 'R' blocks). SET: its
  // register set (register_set(), kAllRegisters or another value for none).
  std::span<const uint8_t> stored_frame(long n, const CompactRegisters*& layout,
                                        uint16_t& set) const {
    const Meta& m = metas_[size_t(n)];
    layout = m.compact ? &sets_[m.held].layout : nullptr;
    set = m.held;
    return {store_.data() + (m.offset - base_), stored_bytes(size_t(n))};
  }
  // The registers frame N's 'R' blocks hold (null: all).
  const std::vector<bool>* frame_registers_held(long n) const;
  // Whether frame N has an 'R' block.
  bool frame_has_registers(long n) const { return metas_[size_t(n)].held != kNoRegisters; }

  // The first frame after frame AFTER (-1: from the start) that matches; -1 if none.
  long find_tracepoint(uint16_t tp_number, long after) const;
  long find_pc(uint64_t pc, long after) const { return find_range(pc, pc, true, after); }
  // INSIDE: lo <= pc <= hi; otherwise pc < lo || pc > hi (gdb's tfind outside).
  long find_range(uint64_t lo, uint64_t hi, bool inside, long after) const;

private:
  // Meta::held: an index into sets_, kAllRegisters, or this.
  static constexpr uint16_t kNoRegisters = 0xfffe; // no 'R' block
  // 24 bytes a frame: a frame's sizes are the distance to the next one's
  // offsets, and its tracepoint and pc are its site's. With the 4 of its
  // site's list, the index costs ~28 bytes a frame: at 48 it was a quarter of
  // the stub's memory beyond the buffer in a 300 000-frame run of 10 000
  // tracepoints (bench/tracepoints.sh).
  struct Meta {
    uint64_t offset;  // logical stored offset (store_ index + base_)
    uint64_t xoffset; // logical offset in the expanded stream
    uint32_t site;    // index into sites_
    uint16_t held;    // register set of the 'R' blocks
    bool compact;     // its register blocks are stored as compact blocks of sets_[held]
  };
  static_assert(sizeof(Meta) == 24, "the index costs 24 bytes a frame (plus 4 in its site's list)");
  // Frames held at once stay below 2^32 (make_room): what SeqList needs.
  static constexpr uint64_t kMaxFrames = SeqList::kMaxSpan;
  struct RegisterSet {
    RegisterMask mask;
    std::vector<bool> held;
    CompactRegisters layout;
  };
  // The frames of one tracepoint at one pc: a tracepoint's location, or a pc
  // its while-stepping reached. tfind tracepoint looks at a tracepoint's
  // sites, tfind pc/range at the sites of the pcs; each frame is in one list.
  struct Site {
    uint64_t pc = 0;
    uint16_t tp = 0;
    SeqList frames;
  };
  static constexpr uint32_t kNoSite = 0xffffffffu;
  static constexpr size_t kDropAhead = 8;     // drop_oldest's prefetch distance, in frames
  static constexpr size_t kStoreAhead = 2048; // append_compact's prefetch distance, in bytes
  // Bytes of a linear buffer made present before the frames reach them: at
  // tstart, then ahead of the frames in the stub's idle moments.
  static constexpr size_t kPreparedAhead = 64 << 20;

  size_t stored_bytes(size_t n) const {
    return (n + 1 < metas_.size() ? metas_[n + 1].offset : base_ + store_.size()) -
           metas_[n].offset;
  }
  bool make_room(size_t bytes);
  void compact_for(size_t bytes);
  size_t circular_slack() const;
  void add_meta(uint16_t tp_number, uint64_t pc, size_t expanded, uint16_t set, bool compact);
  uint32_t site_for(uint16_t tp_number, uint64_t pc);
  void release_site(uint32_t site);
  void drop_oldest();
  void populate_ahead(size_t end);
  void populate_index(size_t entries);
  void prepare_at_start();
  long first_in(uint32_t site, uint64_t from_seq) const;
  long frame_at_stream_offset(uint64_t offset) const;

  size_t capacity_;
  bool circular_ = false;
  uint32_t regblock_size_ = 0;
  std::vector<uint8_t> store_;
  size_t start_ = 0;              // store_ index of the oldest frame
  uint64_t base_ = 0;             // logical offset of store_[0]
  FrontPoppedVector<Meta> metas_; // metas_[n] = frame number n
  uint64_t first_seq_ = 0;        // sequence number of frame 0
  uint64_t created_ = 0;
  uint64_t discarded_ = 0;
  uint64_t next_xoffset_ = 0;     // expanded offset of the next frame appended
  std::vector<RegisterSet> sets_; // see register_set()
  uint16_t last_set_ = 0;         // the set register_set() found last
  // Pages of store_'s and metas_' reservations made present in batches ahead
  // of the writes (populate_ahead, populate_index).
  PreparedPrefix store_prepared_;
  PreparedPrefix index_prepared_;
  bool reserved_ = false;   // store_ reserved for the run (reserve_for_run)
  std::vector<Site> sites_; // Meta::site; those with no frame are on free_sites_
  std::vector<uint32_t> free_sites_;
  std::map<std::pair<uint64_t, uint16_t>, uint32_t> by_pc_; // (pc, tp) -> site
  std::set<std::pair<uint16_t, uint32_t>> by_tp_;           // (tp, site)
  // The site the last frame went to: a busy run's frames come from one
  // location in long runs, and the lookups were ~5 % of a streamed frame's drain.
  uint32_t last_site_ = kNoSite;
};

} // namespace gdbtrace
