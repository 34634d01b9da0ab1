// Where to put a uprobe for a runtime address of a process: the mapped file
// and the file offset (what perf's uprobe PMU and tracefs take).
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"

namespace gdbtrace::bpf {

struct UprobeLocation {
  std::string path;    // file as seen from this process (via /proc/PID/root when needed)
  uint64_t offset = 0; // file offset of the instruction
};

// Resolve ADDRESS in process PID through /proc/PID/maps (PIE executables and
// shared libraries alike), then check with libelf that the offset falls in an
// executable PT_LOAD segment of that file.
Result<UprobeLocation> resolve_uprobe_location(int pid, uint64_t address);

} // namespace gdbtrace::bpf
