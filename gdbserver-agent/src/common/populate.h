// Making memory present before it is written. A page's first write costs the
// kernel's fault (~1.3 us a 4 KB page on the shadow-paging VM of
// docs/benchmarks.md); MADV_POPULATE_WRITE does a batch of pages in one call,
// without writing them, and the trace buffer, its frame index and the stream's
// stages use it where that cost would otherwise fall on a traced thread's CPU.
#pragma once

#include <sys/mman.h>

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

} // namespace gdbtrace
