// Small readers of /proc/<pid>/... used by the target, and the one parser of
// /proc/PID/maps (the collectors' probe sites and the symbol lookup use it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

#include "common/result.h"

namespace gdbtrace::procfs {

std::vector<pid_t> task_ids(pid_t pid);        // /proc/pid/task entries
std::string thread_name(pid_t pid, pid_t tid); // comm, without newline
int thread_core(pid_t pid, pid_t tid);         // "processor" field of stat, -1 unknown
char thread_state(pid_t pid, pid_t tid);       // stat state letter, 0 if gone
bool thread_exists(pid_t pid, pid_t tid);
Result<std::string> read_file(const std::string& path); // whole file, binary-safe
Result<std::string> exe_path(pid_t pid);                // readlink /proc/pid/exe
// Whether /proc/pid/exe is a 32-bit i386 ELF file (EM_386), as gdbserver's
// linux_pid_exe_is_elf_64_file decides a process's architecture.
Result<bool> exe_is_i386(pid_t pid);

// One line of /proc/PID/maps: start-end perms offset major:minor inode path.
struct MapsEntry {
  uint64_t start = 0, end = 0, offset = 0, inode = 0;
  dev_t dev = 0;
  std::string perms;
  std::string path; // the rest of the line ("" for anonymous memory; may hold spaces)
};
// nullopt when LINE is not a maps line.
std::optional<MapsEntry> parse_maps_line(std::string_view line);
// Every well-formed line of a maps text, in order.
std::vector<MapsEntry> parse_maps(std::string_view text);
// /proc/PID/maps, parsed; an error when the process is gone.
Result<std::vector<MapsEntry>> read_maps(pid_t pid);

} // namespace gdbtrace::procfs
