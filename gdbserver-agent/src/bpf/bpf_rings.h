// Per-CPU BPF ring buffers for the eBPF collector, and their consumer.
//
// One BPF_MAP_TYPE_RINGBUF per possible CPU, held in a BPF_MAP_TYPE_ARRAY_OF_MAPS
// indexed by CPU number: a program reserves in the ring of the CPU it runs on, so
// threads on different CPUs never share a ring's spinlock or cache lines. Every
// record starts with a u64 bpf_ktime_get_ns() stamp (RecordStamp); the consumer
// gathers what every ring holds and hands records out in stamp order (hit order)
// through the merge the module's rings use too (trace/ring_merge.h).
//
// With OVERFLOW_BYTES, each CPU has a second, larger ring (another
// ARRAY_OF_MAPS: a map-in-map's inner maps have one size) that a program uses
// only when its CPU's first ring is full: the first stays small enough to stay
// in the cache, which makes every hit cheaper (a record written into a 64 MB
// ring cost ~15% more a hit than into a 4 MB one, docs/benchmarks.md), and the
// large one still absorbs a stub kept from draining (disk stalls, a busy
// machine). The merge orders the records of both by stamp.
//
// The consumer maps each ring's data once (libbpf maps it twice so a record that
// wraps reads contiguously; here a wrapping record is copied), so the stub's
// resident memory is one ring size per CPU, not two.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "trace/ring_merge.h"

namespace gdbtrace::bpf {

class PerCpuRings {
public:
  // RING_BYTES, OVERFLOW_BYTES (0: none): powers of two, at least a page.
  static Result<PerCpuRings> create(size_t ring_bytes, size_t overflow_bytes = 0);

  PerCpuRings() = default;
  PerCpuRings(PerCpuRings&&) = default;
  PerCpuRings& operator=(PerCpuRings&&) = default;

  int outer_fd() const { return outer_.get(); } // the ARRAY_OF_MAPS the programs use
  int overflow_fd() const { return overflow_outer_ ? overflow_outer_.get() : -1; }
  // Readable when a ring was woken since the last take_wakeups() (edge-triggered:
  // a stub that leaves the frames staged must not be told again until the next
  // wake-up, which it would be while a ring merely holds data).
  int epoll_fd() const { return epoll_.get(); }
  void take_wakeups();
  size_t ring_bytes() const { return ring_bytes_; }
  size_t overflow_bytes() const { return overflow_bytes_; }
  size_t ring_count() const { return rings_.size(); }
  explicit operator bool() const { return bool(outer_); }

  // Hands every committed record (without its stamp) and its stamp to FN in stamp order and
  // frees the rings up to the last one handed out; stops at a record still being
  // written (busy), so no frame is ever torn. Returns the records handed out.
  // Works through the rings in passes of at most kPassBytes of each, freeing
  // what a pass handed out before the next: a drain of full 64 MB rings by a
  // stub that gets a fraction of a CPU freed nothing for the whole drain (and
  // sorted 600 000 records at once) while the tracee's hits were dropped for
  // want of room. Stops at what the rings held when it began.
  size_t drain(const std::function<void(std::span<const uint8_t>, uint64_t)>& fn);
  static constexpr size_t kPassBytes = 256 << 10;
  // A pass over a ring of BYTES: an eighth of it, at most kPassBytes. A pass
  // over a whole 1 MB ring freed nothing until its last record was handed out,
  // while the other CPUs' threads went on filling theirs: 4 threads on 2 CPUs
  // dropped ~3 000-5 000 of 400 000 frames a run, ~450-900 with eighths; with
  // the buffer's 1 MB population batches too, none in 14 runs (without
  // eighths, 418 in one round of 14). At most 256 KB: a pass of two 2 MB
  // rings was out of the core's cache by the hand-out, which fetched its lines
  // again; a pass that fits in it does not (streamed runs of 4 threads, 12 s
  // each: 0.088-0.099 us of stub CPU a frame with 2 MB, 0.089 with 256 KB).
  static uint64_t pass_bytes(uint64_t bytes) { return std::min<uint64_t>(kPassBytes, bytes / 8); }
  // Frees every committed record without looking at it.
  void discard();
  // Whether some first ring holds FIRST_BYTES or more not yet consumed, or an
  // overflow ring OVERFLOW_BYTES or more.
  bool any_holds(uint64_t first_bytes, uint64_t overflow_bytes = 1) const;

private:
  // One pass: each ring from its consumer position up to at most kPassBytes,
  // and not past END[r]. Sets MORE when a ring has more before END.
  size_t drain_pass(const std::function<void(std::span<const uint8_t>, uint64_t)>& fn,
                    const std::vector<uint64_t>& end, bool& more);
  struct Ring {
    UniqueFd fd;
    Mapping consumer; // one page, read-write: consumer_pos
    Mapping producer; // producer_pos page + the data, read-only
    size_t bytes = 0; // its data's size
    uint64_t* consumer_pos() const { return static_cast<uint64_t*>(consumer.get()); }
    const uint64_t* producer_pos() const { return static_cast<const uint64_t*>(producer.get()); }
  };

  UniqueFd outer_, overflow_outer_, epoll_;
  std::vector<Ring> rings_;
  size_t ring_bytes_ = 0, overflow_bytes_ = 0;
  size_t first_rings_ = 0; // rings_[0, first_rings_): one per CPU; then the overflow rings
  size_t page_ = 4096;
  RingMerge merge_;
  std::vector<std::vector<uint8_t>> wrapped_; // records that wrap around a ring's end
};

// Bytes in front of every record: the hit's bpf_ktime_get_ns().
constexpr uint32_t kRecordStamp = 8;

} // namespace gdbtrace::bpf
