// Small readers of /proc/<pid>/... used by the target.
#pragma once

#include <string>
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

} // namespace gdbtrace::procfs
