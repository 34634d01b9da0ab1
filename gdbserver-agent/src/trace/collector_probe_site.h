// Where a uprobe goes for a runtime address of a traced process: the mapped
// file, opened (so the probe lands on exactly the inode the process maps, even
// inside a container or after the path was replaced), and the file offset of
// the instruction. Shared by the in-kernel collectors (module and eBPF); the
// one reader of /proc/PID/maps for them.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"
#include "common/unique_fd.h"

namespace gdbtrace {

struct ProbeSite {
  UniqueFd fd;         // the mapped file, read-only
  uint64_t offset = 0; // file offset of the instruction
  std::string path;    // as the process maps it, for messages
  // A path naming exactly FD from this process (/proc/self/fd/N), for
  // interfaces that take a path (perf's uprobe PMU).
  std::string fd_path() const;
};

// ADDRESS must lie in an executable, file-backed mapping of PID whose file
// still exists, inside an executable PT_LOAD segment of that ELF file.
Result<ProbeSite> resolve_probe_site(int pid, uint64_t address);

// True when ADDRESS lies in a PLT section (.plt, .plt.sec, .plt.got) of the file
// PID maps there: a call stub that jumps on to the real function. gdb resolves a
// tracepoint on a function of a library not loaded yet to the executable's stub,
// then to the function itself once the library is in (see TraceEngine).
bool is_plt_stub(int pid, uint64_t address);

} // namespace gdbtrace
