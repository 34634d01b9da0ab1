#include "unwind/process_modules.h"

#include <cerrno>
#include <fstream>
#include <sstream>

namespace gdbtrace {

Result<bool> ProcessModules::refresh(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/maps");
  if (!in)
    return make_error(errno ? errno : ESRCH, "process " + std::to_string(pid) + " is gone");
  // Only mappings of files matter to the unwinder ([stack], [heap] and
  // anonymous memory come and go at every call and would rebuild it for nothing).
  std::string kept, line;
  while (std::getline(in, line)) {
    size_t path = line.find(" /");
    if (path != std::string::npos)
      kept += line + "\n";
  }
  if (kept.empty())
    return make_error(ESRCH, "process " + std::to_string(pid) + " has no mapped files");
  bool changed = kept != maps_ || pid != pid_;
  maps_ = std::move(kept);
  pid_ = pid;
  return changed;
}

} // namespace gdbtrace
