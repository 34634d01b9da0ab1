#include "bpf/bpf_rings.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <sys/epoll.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>

#include "bpf/bpf_support.h"

namespace gdbtrace::bpf {

Result<PerCpuRings> PerCpuRings::create(size_t ring_bytes, size_t overflow_bytes) {
  PerCpuRings r;
  r.ring_bytes_ = ring_bytes;
  r.overflow_bytes_ = overflow_bytes;
  r.page_ = size_t(sysconf(_SC_PAGESIZE));
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0)
    return make_error(EINVAL, "cannot count this machine's CPUs");
  auto fail = [&](const std::string& what) {
    int e = errno;
    return make_error(e, explain_errno(e, what));
  };
  auto make_ring = [&](size_t bytes, int cpu) -> Result<void> {
    Ring ring;
    ring.bytes = bytes;
    ring.fd = UniqueFd(
        bpf_map_create(BPF_MAP_TYPE_RINGBUF, "gdbtrace_rb", 0, 0, uint32_t(bytes), nullptr));
    if (!ring.fd)
      return fail("BPF ring buffer of " + std::to_string(bytes >> 10) + " KB for CPU " +
                  std::to_string(cpu));
    void* c = mmap(nullptr, r.page_, PROT_READ | PROT_WRITE, MAP_SHARED, ring.fd.get(), 0);
    if (c == MAP_FAILED)
      return fail("mmap of a BPF ring buffer's consumer page");
    ring.consumer = Mapping(c, r.page_);
    void* p = mmap(nullptr, r.page_ + bytes, PROT_READ, MAP_SHARED, ring.fd.get(), off_t(r.page_));
    if (p == MAP_FAILED)
      return fail("mmap of a BPF ring buffer's data");
    ring.producer = Mapping(p, r.page_ + bytes);
    r.rings_.push_back(std::move(ring));
    return ok();
  };
  // The programs' map of one CPU's rings: RINGS[first, first + ncpu).
  auto make_outer = [&](const char* name, size_t first) -> Result<UniqueFd> {
    LIBBPF_OPTS(bpf_map_create_opts, opts, .inner_map_fd = uint32_t(r.rings_[first].fd.get()));
    UniqueFd outer(bpf_map_create(BPF_MAP_TYPE_ARRAY_OF_MAPS, name, 4, 4, uint32_t(ncpu), &opts));
    if (!outer)
      return fail("BPF map of per-CPU ring buffers");
    for (uint32_t cpu = 0; cpu < uint32_t(ncpu); cpu++) {
      uint32_t fd = uint32_t(r.rings_[first + cpu].fd.get());
      if (bpf_map_update_elem(outer.get(), &cpu, &fd, BPF_ANY) != 0)
        return fail("filling the map of per-CPU ring buffers");
    }
    return outer;
  };
  for (int cpu = 0; cpu < ncpu; cpu++)
    if (auto m = make_ring(ring_bytes, cpu); !m)
      return m.error();
  r.first_rings_ = r.rings_.size();
  if (overflow_bytes)
    for (int cpu = 0; cpu < ncpu; cpu++)
      if (auto m = make_ring(overflow_bytes, cpu); !m)
        return m.error();
  auto outer = make_outer("gdbtrace_rings", 0);
  if (!outer)
    return outer.error();
  r.outer_ = std::move(*outer);
  if (overflow_bytes) {
    auto more = make_outer("gdbtrace_over", r.first_rings_);
    if (!more)
      return more.error();
    r.overflow_outer_ = std::move(*more);
  }
  r.epoll_ = UniqueFd(epoll_create1(EPOLL_CLOEXEC));
  if (!r.epoll_)
    return fail("epoll_create1");
  for (uint32_t i = 0; i < r.rings_.size(); i++) {
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLET; // a wake-up, not data waiting: see take_wakeups()
    ev.data.u32 = i;
    if (epoll_ctl(r.epoll_.get(), EPOLL_CTL_ADD, r.rings_[i].fd.get(), &ev) != 0)
      return fail("epoll_ctl on a BPF ring buffer");
  }
  return r;
}

void PerCpuRings::take_wakeups() {
  epoll_event events[16];
  while (epoll_wait(epoll_.get(), events, 16, 0) == 16) {
  }
}

bool PerCpuRings::any_holds(uint64_t first_bytes, uint64_t overflow_bytes) const {
  for (size_t i = 0; i < rings_.size(); i++) {
    const Ring& r = rings_[i];
    uint64_t prod =
        std::atomic_ref<const uint64_t>(*r.producer_pos()).load(std::memory_order_acquire);
    uint64_t cons = std::atomic_ref<uint64_t>(*r.consumer_pos()).load(std::memory_order_relaxed);
    if (prod - cons >= (i < first_rings_ ? first_bytes : overflow_bytes))
      return true;
  }
  return false;
}

size_t PerCpuRings::drain(const std::function<void(std::span<const uint8_t>, uint64_t)>& fn) {
  std::vector<uint64_t> end(rings_.size());
  for (size_t i = 0; i < rings_.size(); i++)
    end[i] =
        std::atomic_ref<const uint64_t>(*rings_[i].producer_pos()).load(std::memory_order_acquire);
  size_t records = 0;
  for (bool more = true; more;) {
    more = false;
    size_t n = drain_pass(fn, end, more);
    records += n;
    if (n == 0)
      break; // a ring whose next record is still being written: the next drain
  }
  return records;
}

// How far ahead of a pass's scan its lines are asked for (see drain_pass).
constexpr uint64_t kScanAhead = 8192;

size_t PerCpuRings::drain_pass(const std::function<void(std::span<const uint8_t>, uint64_t)>& fn,
                               const std::vector<uint64_t>& end, bool& more) {
  std::vector<uint64_t> start(rings_.size());
  for (size_t i = 0; i < rings_.size(); i++)
    start[i] = std::atomic_ref<uint64_t>(*rings_[i].consumer_pos()).load(std::memory_order_relaxed);
  merge_.begin(start);
  wrapped_.clear();
  // Records of a ring looked at only in part may be followed there by records
  // that come before those of other rings: hand out only up to the smallest
  // last stamp of such a ring.
  uint64_t max_order = UINT64_MAX;
  for (uint32_t i = 0; i < rings_.size(); i++) {
    const Ring& ring = rings_[i];
    const uint64_t mask = ring.bytes - 1;
    const uint8_t* data = static_cast<const uint8_t*>(ring.producer.get()) + page_;
    uint64_t cons = start[i];
    const uint64_t prod = std::min<uint64_t>(end[i], cons + pass_bytes(ring.bytes));
    uint64_t last_stamp = 0;
    // The records were written on other CPUs: every line of the pass is asked
    // for once, kScanAhead bytes ahead of the scan (the hardware prefetcher stops at each
    // page's end). One line per record 1 KB ahead left the scan's header loads
    // 60 % of its time: with ~200-byte records it skipped two lines in three,
    // often the next header's. The hand-out then finds the lines in the cache.
    uint64_t asked = cons & ~uint64_t(63);
    while (cons < prod) {
      for (const uint64_t to = std::min(prod, cons + kScanAhead); asked < to; asked += 64)
        __builtin_prefetch(data + (asked & mask));
      // The header (u32 len with busy/discard bits, u32 page offset) never wraps.
      const auto* hdr = reinterpret_cast<const uint32_t*>(data + (cons & mask));
      uint32_t len = std::atomic_ref<const uint32_t>(*hdr).load(std::memory_order_acquire);
      if (len & BPF_RINGBUF_BUSY_BIT)
        break; // still being written: later records wait for the next drain
      uint32_t size = len & ~(BPF_RINGBUF_BUSY_BIT | BPF_RINGBUF_DISCARD_BIT);
      uint64_t off = (cons + BPF_RINGBUF_HDR_SZ) & mask;
      cons += (uint64_t(size) + BPF_RINGBUF_HDR_SZ + 7) & ~uint64_t(7);
      if ((len & BPF_RINGBUF_DISCARD_BIT) || size < kRecordStamp)
        continue;
      const uint8_t* rec = data + off;
      if (off + size > ring.bytes) { // wraps: copy the two pieces together
        size_t first = ring.bytes - off;
        auto& copy = wrapped_.emplace_back(data + off, data + ring.bytes);
        copy.insert(copy.end(), data, data + (size - first));
        rec = copy.data(); // a vector's buffer stays put when wrapped_ grows
      }
      uint64_t stamp;
      memcpy(&stamp, rec, sizeof stamp);
      last_stamp = std::max(last_stamp, stamp);
      merge_.add(i, stamp, rec + kRecordStamp, size - kRecordStamp, cons);
    }
    merge_.scanned(i, cons);
    if (cons < end[i] && cons >= prod) { // stopped by the pass's size, not a busy record
      more = true;
      max_order = std::min(max_order, last_stamp);
    }
  }
  size_t records = merge_.hand_out(
      [&](std::span<const uint8_t> r, uint64_t stamp) {
        fn(r, stamp);
        return true;
      },
      max_order);
  for (size_t i = 0; i < rings_.size(); i++)
    std::atomic_ref<uint64_t>(*rings_[i].consumer_pos())
        .store(merge_.free_to(uint32_t(i)), std::memory_order_release);
  return records;
}

void PerCpuRings::discard() {
  drain([](std::span<const uint8_t>, uint64_t) {});
}

} // namespace gdbtrace::bpf
