#include "jumppad/jumppad_area.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/hex.h"
#include "jumppad/jumppad_guard.h"

namespace gdbtrace::jumppad {
namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kReach = (1ull << 31) - (16ull << 20); // rel32, with a margin
constexpr uint64_t kLowest = 0x10000;                     // vm.mmap_min_addr's default
constexpr uint64_t kHighest = 0x7ffffffff000;             // end of user space (4-level)
constexpr uint32_t kMinSlotsPerRing = 16384;              // 3 MB rings (gdb's default 5 MB buffer)
constexpr uint32_t kMaxSlotsPerRing = 262144;             // 48 MB rings

uint32_t ring_count() {
  long cpus = sysconf(_SC_NPROCESSORS_CONF);
  uint32_t n = 1;
  while (n < uint32_t(cpus > 0 ? cpus : 1) && n < kMaxRings)
    n <<= 1;
  return n;
}

Result<int64_t> run(NativeTarget& t, Pid pid, uint64_t code, long nr,
                    std::initializer_list<uint64_t> args, const char* what) {
  std::vector<uint64_t> a(args);
  auto r = t.inject_syscall(pid, code, nr, a);
  if (!r)
    return make_error(r.error().code, std::string(what) + " in the tracee: " + r.error().message);
  if (*r < 0 && *r > -4096)
    return make_error(int(-*r), std::string(what) + " in the tracee: " + std::strerror(int(-*r)));
  return r;
}

// The private page just below a view of the area, its first word set to 1:
// wiped in fork children (MADV_WIPEONFORK), whose pads then only run the
// instruction.
Result<void> map_armed_page(NativeTarget& t, Pid pid, uint64_t site, uint64_t at) {
  auto armed = run(t, pid, site, SYS_mmap,
                   {at, Area::kArmedPage, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, ~0ull, 0},
                   "mmap");
  if (!armed)
    return armed.error();
  if (uint64_t(*armed) != at)
    return make_error(EEXIST, "the tracee mapped the armed page elsewhere");
  if (auto r = run(t, pid, site, SYS_madvise, {at, Area::kArmedPage, MADV_WIPEONFORK}, "madvise");
      !r)
    return r.error();
  static constexpr uint8_t kOne[] = {1, 0, 0, 0};
  if (auto w = t.write_memory(pid, at, kOne); !w || *w != sizeof kOne)
    return make_error(EIO, "cannot arm the jump pad area");
  return ok();
}

} // namespace

Result<uint64_t> choose_address(const std::vector<procfs::MapsEntry>& maps, uint64_t site,
                                uint64_t size) {
  const uint64_t lo = site > kReach + kLowest ? site - kReach : kLowest;
  const uint64_t hi = std::min(site + kReach, kHighest);
  // Below the site first: above an executable lies its heap, which brk grows
  // into (and the kernel's own mmap placement goes top-down).
  std::optional<uint64_t> below, above;
  auto consider = [&](uint64_t gap_start, uint64_t gap_end) {
    gap_start = std::max((gap_start + kPage - 1) & ~(kPage - 1), lo);
    gap_end = std::min(gap_end & ~(kPage - 1), hi);
    if (gap_end <= gap_start || gap_end - gap_start < size)
      return;
    if (gap_end <= site)
      below = gap_end - size; // the highest: nearest the site
    else if (!above && gap_start >= site)
      above = gap_start;
  };
  uint64_t prev_end = kLowest;
  for (const auto& m : maps) {
    if (m.start > prev_end)
      consider(prev_end, m.start);
    prev_end = std::max(prev_end, m.end);
  }
  consider(prev_end, kHighest);
  std::optional<uint64_t> best = below ? below : above;
  if (!best)
    return make_error(ENOSPC, "no free address range within 2 GB of the site for the jump pad");
  return *best;
}

// Slots per ring for a run staging STAGING bytes over RINGS rings: a power of
// two between 3 MB and 48 MB of ring per CPU, as the eBPF collector sizes its
// rings from the buffer. A loop that only hits the pad (~20 ns a hit) fills any
// ring between two polls; larger buffers ask for longer bursts.
uint32_t slots_per_ring(size_t staging, uint32_t rings) {
  uint64_t want = staging / rings / kSlotSize;
  uint32_t slots = kMinSlotsPerRing;
  while (slots < kMaxSlotsPerRing && uint64_t(slots) * 2 <= want)
    slots *= 2;
  return slots;
}

Result<std::unique_ptr<Area>> Area::create(NativeTarget& t, Pid pid, uint64_t site,
                                           size_t staging) {
  std::unique_ptr<Area> a(new Area);
  a->rings_ = ring_count();
  a->slots_ = slots_per_ring(staging, a->rings_);
  a->ring_stride_ = jumppad::ring_stride(a->slots_);
  a->size_ = (kRingOffset + a->rings_ * a->ring_stride_ + kPage - 1) & ~(kPage - 1);

  // The memfd's name goes on the stack of a stopped thread, well below its
  // red zone (the stack there is the thread's to lose, as for a signal frame).
  auto regs = t.read_registers(ThreadId{pid, pid});
  if (!regs)
    return make_error(regs.error().code, "cannot read the registers: " + regs.error().message);
  static constexpr char kName[] = "gdbtrace-jumppad";
  const uint64_t name_at = (regs->get_u64(GT_RSP) - 1024) & ~uint64_t(15);
  if (auto w =
          t.write_memory(pid, name_at, {reinterpret_cast<const uint8_t*>(kName), sizeof kName});
      !w || *w != sizeof kName)
    return make_error(EIO, "cannot write to the tracee's stack");

  auto fd = run(t, pid, site, SYS_memfd_create, {name_at, MFD_CLOEXEC}, "memfd_create");
  if (!fd)
    return fd.error();
  auto close_remote = [&] { (void)run(t, pid, site, SYS_close, {uint64_t(*fd)}, "close"); };
  a->fd_ = UniqueFd(::open(("/proc/" + std::to_string(pid) + "/fd/" + std::to_string(*fd)).c_str(),
                           O_RDWR | O_CLOEXEC));
  if (!a->fd_ || ftruncate(a->fd_.get(), off_t(a->size_)) != 0) {
    int e = errno;
    close_remote();
    return make_error(e, std::string("cannot open the tracee's memfd: ") + std::strerror(e));
  }
  // A private page, then the area over the rest of the reservation: the page
  // holds the guard word's robust-list entry (jumppad_guard.h), kept out of
  // the memory the tracee can write.
  void* below = mmap(nullptr, kPage + a->size_, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  void* p = below == MAP_FAILED
                ? MAP_FAILED
                : mmap(static_cast<uint8_t*>(below) + kPage, a->size_, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_FIXED, a->fd_.get(), 0);
  if (p == MAP_FAILED) {
    int e = errno;
    if (below != MAP_FAILED)
      munmap(below, kPage + a->size_);
    close_remote();
    return make_error(e, std::string("mmap of the jump pad area: ") + std::strerror(e));
  }
  a->below_ = Mapping(below, kPage);
  a->map_ = Mapping(p, a->size_);
  static_assert(kGuardOffset < guard::kEntryToWord && guard::kEntryToWord - kGuardOffset <= kPage);
  init_rings(a->local() + kRingOffset, a->rings_, a->slots_);
  a->tails_.assign(a->rings_, 0);

  auto maps = procfs::read_maps(pid);
  if (!maps) {
    close_remote();
    return maps.error();
  }
  auto at = choose_address(*maps, site, a->size_ + kArmedPage);
  if (!at) {
    close_remote();
    return at.error();
  }
  // The armed page first: private, wiped in fork children, set here to 1.
  if (auto r = map_armed_page(t, pid, site, *at); !r) {
    close_remote();
    return r.error();
  }
  *at += kArmedPage;
  auto mapped = run(t, pid, site, SYS_mmap,
                    {*at, a->size_, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_FIXED_NOREPLACE | MAP_POPULATE, uint64_t(*fd), 0},
                    "mmap");
  close_remote();
  if (!mapped)
    return mapped.error();
  if (uint64_t(*mapped) != *at) {
    (void)run(t, pid, site, SYS_munmap, {uint64_t(*mapped), a->size_}, "munmap");
    return make_error(EEXIST, "the tracee mapped the jump pad area elsewhere");
  }
  a->remote_ = *at;
  a->views_.push_back(*at);
  if (auto r = run(t, pid, site, SYS_mprotect,
                   {a->remote_ + kCodeOffset, kCodeSize, PROT_READ | PROT_EXEC}, "mprotect");
      !r)
    return r.error(); // mapped, no code in it yet: harmless, left in place
  return a;
}

Area::~Area() {
  if (map_.get())
    guard::forget(guard());
}

bool Area::still_mapped(Pid pid) const {
  struct stat mine {
  }, theirs{};
  std::string path = "/proc/" + std::to_string(pid) + "/map_files/" + hex::u64(remote_) + "-" +
                     hex::u64(remote_ + kCodeOffset);
  return fstat(fd_.get(), &mine) == 0 && stat(path.c_str(), &theirs) == 0 &&
         mine.st_ino == theirs.st_ino && mine.st_dev == theirs.st_dev;
}

bool Area::reaches(uint64_t view, uint64_t site) const {
  auto dist = [site](uint64_t a) { return a > site ? a - site : site - a; };
  return dist(view) < kReach && dist(view + size_) < kReach;
}

Result<uint64_t> Area::view_for(NativeTarget& t, Pid pid, uint64_t site) {
  for (uint64_t v : views_)
    if (reaches(v, site))
      return v;
  auto maps = procfs::read_maps(pid);
  if (!maps)
    return maps.error();
  auto at = choose_address(*maps, site, size_ + kArmedPage);
  if (!at)
    return at.error();
  if (auto r = map_armed_page(t, pid, site, *at); !r) // its own, as at create
    return r.error();
  const uint64_t view = *at + kArmedPage;
  // The same pages again: mremap with old_size 0 duplicates a shared mapping,
  // one mapping (one protection) at a time. The gap is free and every thread
  // stopped, so MREMAP_FIXED replaces nothing.
  const uint64_t parts[][2] = {
      {0, kCodeOffset}, {kCodeOffset, kCodeSize}, {kRingOffset, size_ - kRingOffset}};
  for (const auto& [offset, length] : parts) {
    auto r =
        run(t, pid, site, SYS_mremap,
            {remote_ + offset, 0, length, MREMAP_MAYMOVE | MREMAP_FIXED, view + offset}, "mremap");
    if (!r)
      return r.error();
    if (uint64_t(*r) != view + offset)
      return make_error(EEXIST, "the tracee mapped the jump pad area's view elsewhere");
  }
  views_.push_back(view);
  return view;
}

Result<uint32_t> Area::new_tp_slot() {
  if (tp_slots_used_ == kMaxTpSlots)
    return make_error(ENOSPC, "the jump pad area's tracepoint slots are used up");
  return tp_slots_used_++;
}

Result<uint32_t> Area::tsv_index(uint32_t number) {
  if (auto it = tsv_index_.find(number); it != tsv_index_.end())
    return it->second;
  if (tsv_index_.size() == kMaxTsvs)
    return make_error(ENOSPC, "more trace state variables than the jump pad area holds");
  uint32_t i = uint32_t(tsv_index_.size());
  tsv_index_[number] = i;
  return i;
}

Result<uint64_t> Area::place_code(const std::vector<uint8_t>& code, uint64_t view) {
  if (code_used_ + code.size() > kCodeSize)
    return make_error(ENOSPC, "the jump pad area's code region is full");
  uint64_t at = next_code(view);
  std::memcpy(local() + kCodeOffset + code_used_, code.data(), code.size());
  code_used_ += (code.size() + 15) & ~size_t(15);
  return at;
}

void init_rings(uint8_t* ring_base, uint32_t rings, uint32_t slots) {
  // Slot i is free for position i.
  for (uint32_t r = 0; r < rings; ++r)
    for (uint32_t s = 0; s < slots; ++s)
      reinterpret_cast<Record*>(ring_base + r * ring_stride(slots) + uint64_t(s) * kSlotSize)->seq =
          s;
}

std::vector<Record> take_records(uint8_t* ring_base, uint32_t slots, std::vector<uint64_t>& tails) {
  std::vector<Record> out;
  take_batch(ring_base, slots, tails, slots, out);
  return out;
}

uint64_t take_batch(uint8_t* ring_base, uint32_t slots, std::vector<uint64_t>& tails, uint32_t max,
                    std::vector<Record>& out) {
  auto seq_at = [&](uint8_t* ring, uint64_t pos) {
    return std::atomic_ref<uint64_t>(
        reinterpret_cast<Record*>(ring + (pos & (slots - 1)) * kSlotSize)->seq);
  };
  uint64_t cutoff = UINT64_MAX;
  for (uint32_t r = 0; r < tails.size(); ++r) {
    uint8_t* ring = ring_base + r * ring_stride(slots);
    uint64_t last_stamp = 0;
    uint32_t taken = 0; // positions
    while (taken < std::min(max, slots)) {
      const uint64_t t = tails[r];
      auto seq = seq_at(ring, t);
      if (seq.load(std::memory_order_acquire) != t + 1)
        break;
      const uint8_t* slot = ring + (t & (slots - 1)) * kSlotSize;
      Record& copy = out.emplace_back();
      std::memcpy(&copy, slot, kSlotSize);
      // A second slot only where the record says so and that position is
      // committed with it (pad: seq = pos + 2 before the first's commit); its
      // bytes follow the first slot's (the overhang past the last). Anything
      // else takes one position, and slots = 0 tells the collector the record
      // is broken (the tracee writes these slots: untrusted).
      uint32_t n = 1;
      if (copy.slots == 2 && taken + 1 < slots &&
          seq_at(ring, t + 1).load(std::memory_order_acquire) == t + 2) {
        std::memcpy(reinterpret_cast<uint8_t*>(&copy) + kSlotSize, slot + kSlotSize, kSlotSize);
        n = 2;
      } else if (copy.slots != 1) {
        copy.slots = 0;
      }
      for (uint32_t k = 0; k < n; ++k)
        seq_at(ring, t + k).store(t + k + slots, std::memory_order_release);
      tails[r] = t + n;
      taken += n;
      last_stamp = std::max(last_stamp, copy.stamp);
    }
    if (taken >= max)
      cutoff = std::min(cutoff, last_stamp);
  }
  return cutoff;
}

uint64_t ring_backlog(const uint8_t* heads, const std::vector<uint64_t>& tails) {
  uint64_t most = 0;
  for (uint32_t r = 0; r < tails.size(); ++r) {
    const auto* h = reinterpret_cast<const RingHead*>(heads) + r;
    const uint64_t head = std::atomic_ref<const uint64_t>(h->head).load(std::memory_order_relaxed);
    most = std::max(most, head - tails[r]);
  }
  return most;
}

} // namespace gdbtrace::jumppad
