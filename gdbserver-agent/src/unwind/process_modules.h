// The module list of a traced process: the file-backed lines of
// /proc/PID/maps, read while the process lives and kept after it exits, since
// trace frames are read (and unwound) long after the run.
#pragma once

#include <string>

#include "common/result.h"

namespace gdbtrace {

class ProcessModules {
public:
  // Reads /proc/PID/maps. True when the module list changed since the last
  // successful read (the unwinder then reports the modules to libdw again).
  // An error (the process is gone) keeps the last list.
  Result<bool> refresh(int pid);
  // The kept lines, in /proc/PID/maps format ("" before any read).
  const std::string& maps() const { return maps_; }
  int pid() const { return pid_; }

private:
  std::string maps_;
  int pid_ = -1;
};

} // namespace gdbtrace
