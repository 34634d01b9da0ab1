// RAII wrapper over one /dev/gdbtrace session: the file descriptor, the
// mmap()ed per-CPU rings and the ioctls of kmodule/uapi/gdbtrace_uapi.h.
// Destroying it closes the file, which makes the module remove every probe.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "common/result.h"
#include "common/unique_fd.h"
#include "gdbtrace_uapi.h"
#include "trace/ring_merge.h"

namespace gdbtrace::kmod {

class ModuleSession {
public:
  // Opens the device (not yet initialised).
  static Result<ModuleSession> open(const char* path = GDBTRACE_DEVICE);
  int fd() const { return fd_.get(); }
  bool initialized() const { return map_.get() != nullptr; }
  const gdbtrace_init& info() const { return init_; }

  // INIT + mmap. REGBLOCK_SIZE 560/816; rings of 1 << RING_SHIFT bytes per CPU.
  Result<void> init(uint32_t regblock_size, uint32_t ring_shift);
  Result<uint32_t> add_probe(gdbtrace_probe_add& req);
  Result<void> enable(uint32_t id, bool on);
  Result<void> start();
  Result<void> stop();
  Result<void> remove_all();
  Result<gdbtrace_probe_status> probe_status(uint32_t id) const;
  Result<gdbtrace_session_status> status() const;
  Result<void> define_tsv(uint32_t num, int64_t value);
  Result<int64_t> get_tsv(uint32_t num) const;

  // Hands every complete frame in the rings to FN in hit order (the module's
  // sequence numbers, across rings) and frees its space. FN returning false stops draining (frame
  // kept).
  size_t drain(const std::function<bool(std::span<const uint8_t>)>& fn);
  // Whether some ring is at least half full (the mark past which the module wakes the stub).
  bool any_half_full() const;
  // Frames each ring (ring r: CPU r) had no room for, since the session began.
  std::vector<uint64_t> ring_drops() const;

private:
  explicit ModuleSession(UniqueFd fd) : fd_(std::move(fd)) {}
  Result<void> ioctl_checked(unsigned long cmd, void* arg, const char* what) const;
  gdbtrace_ring_header* ring(uint32_t r) const {
    return reinterpret_cast<gdbtrace_ring_header*>(static_cast<uint8_t*>(map_.get()) +
                                                   size_t(r) * init_.ring_stride);
  }

  // Closing the file makes the module remove this session's probes.
  UniqueFd fd_;
  gdbtrace_init init_{};
  Mapping map_; // unmapped before fd_ closes (members go in reverse order)
  RingMerge merge_;
};

} // namespace gdbtrace::kmod
