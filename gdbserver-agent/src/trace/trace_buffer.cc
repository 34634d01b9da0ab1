#include "trace/trace_buffer.h"

#include <algorithm>
#include <limits>
#include <new>

#include <sys/mman.h>
#include <unistd.h>

#include "common/populate.h"
#include "trace/frame.h"

namespace gdbtrace {

void TraceBuffer::clear() {
  store_.clear();
  store_.shrink_to_fit();
  start_ = 0;
  base_ = 0;
  metas_.clear();
  first_seq_ = 0;
  created_ = 0;
  discarded_ = 0;
  next_xoffset_ = 0;
  sites_.clear();
  free_sites_.clear();
  by_tp_.clear();
  by_pc_.clear();
  last_site_ = kNoSite;
  store_prepared_.reset();
  index_prepared_.reset();
  reserved_ = false;
}

void TraceBuffer::reserve_for_run() {
  // Growing by doubling during a run copies the whole buffer each time (and
  // faults in the new block), stealing CPU from the tracee while kernel rings
  // fill up. Reserve once instead: untouched pages cost nothing until written.
  // A circular buffer keeps the bytes of the frames it dropped in front of the
  // live ones until an append would outgrow the reservation (compact_for): the
  // slack beyond the live size says how often the live bytes are moved down.
  size_t want = circular_ ? capacity_ + circular_slack() : capacity_;
  if (store_.capacity() >= want) {
    reserved_ = true;
    return;
  }
  try {
    store_.reserve(want);
  } catch (const std::bad_alloc&) {
    // Address space refused (huge size, strict overcommit): grow on demand as before.
    return;
  }
  reserved_ = true;
  // The index too, for frames of 128 bytes or more (a register-only eBPF frame
  // is ~180): growing it by doubling during a run copied it and faulted in
  // each new block. Untouched entries cost address space only.
  try {
    metas_.reserve(std::min<size_t>(want / 128, kMaxFrames));
  } catch (const std::bad_alloc&) { // it grows on demand
  }
  prepare_at_start();
}

// At least the live size (each compaction then moves at most what the appends
// since the last one wrote), up to 4x it below 32 MB: gdb's default 5 MB
// buffer, streamed, moves its live bytes once per 20 MB of frames, not once
// per 5 (that move was 7 % of a streamed frame's drain), for 15 MB of memory.
size_t TraceBuffer::circular_slack() const {
  return std::max(capacity_, std::min(4 * capacity_, size_t(32) << 20));
}

// QTStart runs while gdb holds the tracee stopped: the first kPreparedAhead
// bytes of the buffer are made present and written once now, so the frames of
// most runs land in memory that costs nothing more to write. A page's first
// write is what costs (the kernel's fault or populate, and on a
// shadow-paging hypervisor a second trap at the first user write after it):
// ~1 us per 823-byte frame on the paravirtualised VM of docs/benchmarks.md,
// ~40 ns once written, and during a run that CPU is taken from the tracee's
// threads. Bounded, so a 1 GB buffer costs 64 MB at start, not 1 GB; beyond it
// populate_ahead prepares batches as frames arrive, and prepare_idle ahead of
// them while a CPU is idle.
void TraceBuffer::prepare_at_start() {
  size_t bytes = std::min(store_.capacity(), kPreparedAhead);
  populate_ahead(bytes);
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  // Reserved storage, not yet elements: raw bytes the appends overwrite. (Where
  // MADV_POPULATE_WRITE is missing, these writes fault the pages in.)
  auto* base = reinterpret_cast<volatile uint8_t*>(store_.data());
  for (size_t at = 0; at < bytes; at += page)
    base[at] = 0;
}

void TraceBuffer::set_capacity(size_t bytes) {
  capacity_ = bytes;
  clear();
}

bool TraceBuffer::append(std::span<const uint8_t> frame, uint16_t tp_number, uint64_t pc,
                         uint16_t set) {
  size_t register_blocks = 0;
  FrameView(frame, regblock_size_).for_each([&](const FrameBlock& b) {
    register_blocks += b.type == GT_TFRAME_REGS;
    return true;
  });
  if (register_blocks == 0)
    set = kNoRegisters;
  // Compact only what gets smaller: a set of nearly all registers in u64 slots can be larger.
  size_t stored = frame.size();
  bool compact = false;
  if (set < sets_.size()) {
    size_t small = compact_size(frame.size(), register_blocks, sets_[set].layout, regblock_size_);
    compact = small < stored;
    stored = std::min(small, stored);
  }
  if (!make_room(stored))
    return false;
  add_meta(tp_number, pc, frame.size(), set, compact);
  populate_ahead(store_.size() + stored);
  if (compact) {
    size_t at = store_.size();
    store_.resize(at + stored);
    compact_frame(frame, sets_[set].layout, regblock_size_, store_.data() + at);
  } else {
    store_.insert(store_.end(), frame.begin(), frame.end());
  }
  return true;
}

bool TraceBuffer::append_compact(std::span<const uint8_t> frame, uint16_t tp_number, uint64_t pc,
                                 uint16_t set) {
  size_t register_blocks = 0;
  FrameView(frame, regblock_size_, sets_[set].layout.block_size())
      .for_each([&](const FrameBlock& b) {
        register_blocks += b.type == GT_TFRAME_COMPACT_REGS;
        return true;
      });
  return append_compact(frame, tp_number, pc, set, register_blocks);
}

bool TraceBuffer::append_compact(std::span<const uint8_t> frame, uint16_t tp_number, uint64_t pc,
                                 uint16_t set, size_t register_blocks) {
  const CompactRegisters& layout = sets_[set].layout;
  if (!make_room(frame.size()))
    return false;
  size_t expanded = frame.size() + register_blocks * (GT_TFRAME_REGS_HEADER + regblock_size_ -
                                                      layout.block_size());
  add_meta(tp_number, pc, expanded, register_blocks ? set : kNoRegisters, register_blocks > 0);
  populate_ahead(store_.size() + frame.size());
  // The store's next lines are not in the cache (fresh pages, or a circular
  // buffer's oldest bytes): the copy waited for each line it wrote, ~30 % of a
  // drained frame (perf, 2 threads into a 1 GB buffer). They are asked for,
  // for writing, a few frames ahead: ~60 -> ~45 ns a frame.
  const uint8_t* ahead = store_.data() + store_.size() + kStoreAhead;
  for (size_t line = 0; line < frame.size(); line += 64)
    __builtin_prefetch(ahead + line, 1);
  store_.insert(store_.end(), frame.begin(), frame.end());
  return true;
}

// Indexes the frame about to be written at the end of the store; EXPANDED: its tfile size.
void TraceBuffer::add_meta(uint16_t tp_number, uint64_t pc, size_t expanded, uint16_t set,
                           bool compact) {
  uint64_t seq = first_seq_ + metas_.size();
  if (!index_prepared_.holds(metas_.storage(), (metas_.stored() + 1) * sizeof(Meta)))
    populate_index(metas_.stored() + 1);
  uint32_t site = site_for(tp_number, pc);
  metas_.push_back(Meta{base_ + store_.size(), next_xoffset_, site, set, compact});
  next_xoffset_ += expanded;
  sites_[site].frames.push_back(seq);
  ++created_;
}

// The site of TP_NUMBER at PC, made when it has no frame yet.
uint32_t TraceBuffer::site_for(uint16_t tp_number, uint64_t pc) {
  if (last_site_ != kNoSite && sites_[last_site_].tp == tp_number && sites_[last_site_].pc == pc)
    return last_site_;
  auto [it, added] = by_pc_.try_emplace({pc, tp_number}, kNoSite);
  if (added) {
    if (free_sites_.empty()) {
      it->second = uint32_t(sites_.size());
      sites_.emplace_back();
    } else {
      it->second = free_sites_.back();
      free_sites_.pop_back();
    }
    sites_[it->second].pc = pc;
    sites_[it->second].tp = tp_number;
    by_tp_.emplace(tp_number, it->second);
  }
  return last_site_ = it->second;
}

// SITE holds no frame any more (circular discards): it goes, its number is reused.
void TraceBuffer::release_site(uint32_t site) {
  Site& s = sites_[site];
  by_pc_.erase({s.pc, s.tp});
  by_tp_.erase({s.tp, site});
  s = Site();
  free_sites_.push_back(site);
  if (last_site_ == site)
    last_site_ = kNoSite;
}

// Room for BYTES more stored bytes: there already, or (circular) made by
// discarding the oldest frames.
bool TraceBuffer::make_room(size_t bytes) {
  if (bytes > capacity_)
    return false;
  if (bytes > free_bytes() || metas_.size() >= kMaxFrames) {
    if (!circular_)
      return false;
    while (bytes > free_bytes() || metas_.size() >= kMaxFrames)
      drop_oldest();
  }
  compact_for(bytes);
  return true;
}

// Moves the live bytes to the front of the store, over the dropped frames',
// when appending BYTES would outgrow its reservation; a store grown on demand
// (no reservation) once the dead prefix is the larger part. A dead prefix
// under a quarter of the live bytes when the store is outgrown (a buffer made
// circular after its run's reservation) is left for the vector to grow past:
// moving every live byte to gain a frame's room would do it at every append.
// Each byte moves O(1) times.
void TraceBuffer::compact_for(size_t bytes) {
  if (start_ == 0)
    return;
  const bool outgrows = store_.size() + bytes > store_.capacity();
  if (outgrows ? start_ < used() / 4 : (reserved_ || start_ <= store_.size() / 2))
    return;
  store_.erase(store_.begin(), store_.begin() + long(start_));
  base_ += start_;
  start_ = 0;
}

// A run has a few register sets (one per collector kind and FPU choice),
// looked up when a tracepoint is installed, and for each frame a kernel ring
// hands over as a compact record: the set found last is tried first.
uint16_t TraceBuffer::register_set(const RegisterMask& held) {
  if (last_set_ < sets_.size() && sets_[last_set_].mask == held)
    return last_set_;
  for (size_t i = 0; i < sets_.size(); ++i)
    if (sets_[i].mask == held)
      return last_set_ = uint16_t(i);
  std::vector<bool> regs(GT_NUM_REGS_AVX);
  for (unsigned r = 0; r < regs.size(); ++r)
    regs[r] = held[r];
  sets_.push_back({held, regs, CompactRegisters::of_mask(held)});
  return last_set_ = uint16_t(sets_.size() - 1);
}

// Makes the reserved pages up to END (and a batch beyond) present before the
// copy writes them. Faulting them in one page at a time on first write was most
// of the stub's CPU per frame (perf of a 1 M-frame `collect $regs` drain: page
// faults, and on a paravirtualised guest each one a hypervisor round trip);
// MADV_POPULATE_WRITE does a batch in one call, about a third of the cost. Only
// a batch ahead, never the whole reservation: a 1 GB buffer that holds ten
// frames stays small. A batch is 1 MB: the drain stops while it is made
// present (~0.4 us a page on the 2-vCPU VM), and a 4 MB batch (~1.7 ms) let
// the other CPU's threads fill a 1 MB ring past its room meanwhile (4 threads
// on 2 CPUs: ~3 000-5 000 of 400 000 frames dropped a run; none with 1 MB batches).
void TraceBuffer::populate_ahead(size_t end) {
  store_prepared_.ensure(store_.data(), store_.capacity(), end, 1 << 20);
}

// Makes the frame index's first ENTRIES present (and a 64 KB batch beyond):
// the first writes of its entries, a fault each 4 KB, were ~10 % of the stub's
// CPU a frame in a drain into a 1 GB buffer (perf). Only as frames come: the
// index reserved for a buffer of small frames is large (24 bytes per 128 of
// buffer), and a run that stores none should not pay for it.
void TraceBuffer::populate_index(size_t entries) {
  index_prepared_.ensure(metas_.storage(), metas_.capacity() * sizeof(Meta), entries * sizeof(Meta),
                         64 << 10);
}

// A page made present while the tracee's threads run costs them its CPU when
// no CPU is idle (two traced threads on two CPUs draining into a 1 GB buffer:
// ~0.8x the raw floor's scaling past the pages prepared at tstart, ~0.9x
// inside them). The drain heartbeat calls this when a CPU is idle: one batch
// of 1 MB (~0.35 ms of the stub's thread on the VM of docs/benchmarks.md, as
// populate_ahead's), up to kPreparedAhead beyond the frames, the memory
// prepare_at_start already costs.
bool TraceBuffer::prepare_idle() {
  constexpr size_t kIdleBatch = 1 << 20;
  if (circular_ || !store_prepared_.preparing(store_.data()))
    return false; // a circular buffer's pages are its own after one lap
  size_t limit = std::min(store_.capacity(), store_.size() + kPreparedAhead);
  if (store_prepared_.end() >= limit)
    return false;
  populate_ahead(std::min(limit, store_prepared_.end() + kIdleBatch));
  // The index entries of the frames that fit there, at their average size so far.
  if (size_t stored = metas_.stored())
    populate_index(store_prepared_.end() / std::max<size_t>(store_.size() / stored, 16));
  return true;
}

void TraceBuffer::drop_oldest() {
  // The oldest frames' index entries were written a whole buffer ago: out of
  // the cache. Their loads were ~70 % of what a drop cost in a streamed
  // circular run (perf, 4 threads); the drops come in order, so the entries
  // are asked for kDropAhead frames ahead.
  if (metas_.size() > kDropAhead)
    __builtin_prefetch(&metas_[kDropAhead]);
  const uint32_t site = metas_.front().site;
  const size_t size = stored_bytes(0);
  sites_[site].frames.pop_front();
  if (sites_[site].frames.empty())
    release_site(site);
  metas_.pop_front();
  ++first_seq_;
  ++discarded_;
  start_ += size; // the bytes stay until compact_for needs the room
}

std::span<const uint8_t> TraceBuffer::frame(long n, std::vector<uint8_t>& scratch) const {
  if (n < 0 || size_t(n) >= metas_.size())
    return {};
  const Meta& m = metas_[size_t(n)];
  std::span<const uint8_t> stored{store_.data() + (m.offset - base_), stored_bytes(size_t(n))};
  if (!m.compact)
    return stored;
  // Cannot fail: append wrote it from a well-formed frame.
  expand_frame(stored, sets_[m.held].layout, regblock_size_, scratch);
  return scratch;
}

const std::vector<bool>* TraceBuffer::frame_registers_held(long n) const {
  uint16_t set = metas_[size_t(n)].held;
  return set < sets_.size() ? &sets_[set].held : nullptr;
}

uint64_t TraceBuffer::stream_size() const {
  return metas_.empty() ? 0 : next_xoffset_ - metas_.front().xoffset;
}

// The frame holding stream offset OFFSET (< stream_size()): the last one
// starting at or before it.
long TraceBuffer::frame_at_stream_offset(uint64_t offset) const {
  uint64_t at = metas_.front().xoffset + offset;
  auto it = std::upper_bound(metas_.begin(), metas_.end(), at,
                             [](uint64_t x, const Meta& m) { return x < m.xoffset; });
  return long(it - metas_.begin()) - 1;
}

void TraceBuffer::read_stream(uint64_t offset, uint64_t length, const Sink& sink) const {
  uint64_t size = stream_size();
  if (offset >= size || length == 0)
    return;
  length = std::min(length, size - offset);
  long n = frame_at_stream_offset(offset);
  uint64_t skip = metas_.front().xoffset + offset - metas_[size_t(n)].xoffset;
  std::vector<uint8_t> scratch;
  // Frames stored as they are lie back to back in the store: one span for a run of them.
  std::span<const uint8_t> run;
  auto flush = [&] {
    bool more = run.empty() || sink(run);
    run = {};
    return more;
  };
  for (; length > 0; ++n) {
    const Meta& m = metas_[size_t(n)];
    std::span<const uint8_t> bytes = frame(n, scratch);
    bytes = bytes.subspan(skip, std::min<uint64_t>(bytes.size() - skip, length));
    skip = 0;
    length -= bytes.size();
    if (!m.compact && !run.empty() && run.data() + run.size() == bytes.data()) {
      run = {run.data(), run.size() + bytes.size()};
      continue;
    }
    if (!flush())
      return;
    if (!m.compact) {
      run = bytes;
      continue;
    }
    if (!sink(bytes)) // SCRATCH is reused by the next frame
      return;
  }
  flush();
}

long TraceBuffer::first_in(uint32_t site, uint64_t from_seq) const {
  auto seq = sites_[site].frames.first_from(from_seq);
  return seq ? long(*seq - first_seq_) : -1;
}

long TraceBuffer::find_tracepoint(uint16_t tp_number, long after) const {
  uint64_t from = first_seq_ + uint64_t(after + 1);
  long best = -1;
  // One binary search per site: a location, and each pc its while-stepping reached.
  for (auto it = by_tp_.lower_bound({tp_number, 0}); it != by_tp_.end() && it->first == tp_number;
       ++it) {
    long n = first_in(it->second, from);
    if (n >= 0 && (best < 0 || n < best))
      best = n;
  }
  return best;
}

long TraceBuffer::find_range(uint64_t lo, uint64_t hi, bool inside, long after) const {
  uint64_t from = first_seq_ + uint64_t(after + 1);
  long best = -1;
  auto consider = [&](auto begin, auto end) {
    for (auto it = begin; it != end; ++it) {
      long n = first_in(it->second, from);
      if (n >= 0 && (best < 0 || n < best))
        best = n;
    }
  };
  // One binary search per site of a pc in the range (tracepoint locations, while-stepping pcs).
  constexpr uint16_t kLastTp = 0xffff;
  if (inside) {
    if (lo > hi)
      return -1;
    consider(by_pc_.lower_bound({lo, 0}), by_pc_.upper_bound({hi, kLastTp}));
  } else {
    consider(by_pc_.begin(), by_pc_.lower_bound({lo, 0}));
    if (hi != std::numeric_limits<uint64_t>::max())
      consider(by_pc_.upper_bound({hi, kLastTp}), by_pc_.end());
  }
  return best;
}

} // namespace gdbtrace
