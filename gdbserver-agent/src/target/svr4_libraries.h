// Walks the inferior's svr4 link map (r_debug from DT_DEBUG of the main
// executable's dynamic section, found through the auxv program headers),
// the way gdbserver builds qXfer:libraries-svr4.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "target/native_target.h"

namespace gdbtrace {

using MemoryReader = std::function<Result<size_t>(uint64_t address, std::span<uint8_t> out)>;

struct LinkMapSnapshot {
  uint64_t main_lm = 0;               // first entry of the default namespace (the executable)
  std::vector<LibraryInfo> libraries; // every later entry with a name, all namespaces
};

// Error when the executable has no DT_DEBUG (static executable: gdb falls back);
// an empty snapshot when the dynamic loader has not filled r_debug yet.
Result<LinkMapSnapshot> read_link_map(const std::string& auxv, const MemoryReader& read);

} // namespace gdbtrace
