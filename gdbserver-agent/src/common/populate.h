// Making memory present before it is written. A page's first write costs the
// kernel's fault (~1.3 us a 4 KB page on the shadow-paging VM of
// docs/benchmarks.md); MADV_POPULATE_WRITE does a batch of pages in one call,
// without writing them, and the trace buffer, its frame index and the stream's
// stages use it where that cost would otherwise fall on a traced thread's CPU.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace gdbtrace {

// Makes the pages of [FROM, TO) present and writable. False where the kernel
// lacks MADV_POPULATE_WRITE (before Linux 5.14: EINVAL): the pages are then
// faulted in as they are written, as they would have been.
inline bool populate_for_write(const void* from, const void* to) {
#ifndef MADV_POPULATE_WRITE
  constexpr int MADV_POPULATE_WRITE = 23; // Linux 5.14
#endif
  const uintptr_t page = 4096;
  uintptr_t start = uintptr_t(from) & ~(page - 1);
  uintptr_t end = (uintptr_t(to) + page - 1) & ~(page - 1);
  if (end <= start)
    return true;
  return ::madvise(reinterpret_cast<void*>(start), end - start, MADV_POPULATE_WRITE) == 0;
}

// The first end() bytes of a reserved storage, made present in batches ahead
// of the writes into it (the trace buffer's store and frame index).
class PreparedPrefix {
public:
  // Whether the first BYTES of the storage at BASE are present.
  bool holds(const void* base, size_t bytes) const { return base == base_ && bytes <= end_; }
  // Whether BASE is the storage prepared so far, and preparing it works.
  bool preparing(const void* base) const { return base == base_ && works_; }
  size_t end() const { return end_; }
  // Makes the first NEED bytes of the CAPACITY bytes at BASE present, and a
  // BATCH beyond, when they are not: one call per batch. A new BASE (the
  // storage moved) starts over. Nothing where NEED is beyond the capacity
  // (no reservation: the storage grows on demand), or where the kernel lacks
  // MADV_POPULATE_WRITE (the writes fault the pages in).
  void ensure(const void* base, size_t capacity, size_t need, size_t batch) {
    if (base != base_) {
      base_ = base;
      end_ = 0;
    }
    if (need <= end_ || !works_)
      return;
    size_t target = std::min(capacity, std::max(need, end_ + batch));
    if (target < need)
      return;
    const auto* at = static_cast<const uint8_t*>(base);
    works_ = populate_for_write(at + end_, at + target);
    end_ = target;
  }
  void reset() { *this = PreparedPrefix(); }

private:
  const void* base_ = nullptr;
  size_t end_ = 0;
  bool works_ = true;
};

} // namespace gdbtrace
