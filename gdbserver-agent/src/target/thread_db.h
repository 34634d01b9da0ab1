// Thread-local storage addresses through glibc's libthread_db
// (td_thr_tls_get_addr), as gdbserver answers qGetTLSAddr: the library knows
// glibc's TCB and DTV layout (static TLS, and dynamic TLS of dlopen'ed
// modules), so the stub does not have to. Like gdbserver, the library is
// dlopen'ed from `libthread-db-search-path` (`monitor set
// libthread-db-search-path`); without one, TLS requests fail with a reason.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <sys/types.h>

#include "common/result.h"

struct ps_prochandle;
struct td_thragent;

namespace gdbtrace {

class ThreadDb {
public:
  // gdbserver's default: "$pdir" (the program's libpthread directory, which
  // gdbserver ignores too) and "$sdir" (the system's library path).
  static constexpr const char* kDefaultSearchPath = "$pdir:$sdir";
  // Colon-separated directories, "$sdir" or "$pdir"; "" restores the default.
  // Applies to libthread_db loaded from then on (one already loaded for a
  // process stays, as in gdbserver).
  static void set_search_path(const std::string& path);
  static const std::string& search_path();

  // Attaches libthread_db to process PID. Fails while the process has no
  // initialised threading library yet (e.g. stopped before libc was loaded).
  static Result<std::unique_ptr<ThreadDb>> open(pid_t pid);
  ~ThreadDb();
  ThreadDb(const ThreadDb&) = delete;
  ThreadDb& operator=(const ThreadDb&) = delete;

  // Address of the variable at OFFSET in the TLS block of the module whose
  // link_map is at LM (0: the executable's), for thread TID, which must be
  // stopped under ptrace.
  Result<uint64_t> tls_address(pid_t tid, uint64_t lm, uint64_t offset);

private:
  struct Library; // the dlopen'ed libthread_db and its entry points
  ThreadDb() = default;
  std::unique_ptr<ps_prochandle> handle_;
  std::unique_ptr<Library> lib_;
  td_thragent* agent_ = nullptr;
};

} // namespace gdbtrace
