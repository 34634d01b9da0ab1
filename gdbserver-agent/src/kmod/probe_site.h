// Where a uprobe goes for a runtime address: the mapped file (opened, so the
// module gets the exact inode) and the file offset, from /proc/PID/maps.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"

namespace gdbtrace::kmod {

struct ProbeSite {
  int fd = -1;         // open read-only file descriptor of the mapped file (caller closes)
  uint64_t offset = 0; // file offset of the instruction
  std::string path;    // for messages
};

// ADDRESS must lie in an executable file-backed mapping of PID.
Result<ProbeSite> resolve_probe_site(int pid, uint64_t address);

} // namespace gdbtrace::kmod
