// libthread_db glue (see thread_db.h): the proc_service callbacks the library
// calls back into, and the TLS lookup itself.
#include "target/thread_db.h"

#include <cerrno>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <proc_service.h>
#include <string>
#include <sys/ptrace.h>
#include <sys/user.h>
extern "C" { // glibc's thread_db.h has no C++ guards
#include <thread_db.h>
}
#include <unistd.h>

#include "target/elf_symbols.h"

// The process handle libthread_db passes back to every callback.
struct ps_prochandle {
  pid_t pid = 0;
  int mem_fd = -1; // /proc/pid/mem
};

namespace {

const char* td_error_text(td_err_e e) {
  switch (e) {
  case TD_NOLIBTHREAD:
    return "the program does not use the thread library (yet)";
  case TD_VERSION:
    return "libthread_db does not match the program's libc version";
  case TD_NOTLS:
    return "the module has no thread-local storage";
  case TD_NOTALLOC: // == TD_TLSDEFER
    return "the thread has not allocated the module's thread-local storage yet";
  case TD_ERR:
    return "libthread_db could not read the thread's state";
  case TD_NOTHR:
  case TD_BADTH:
    return "libthread_db does not know this thread";
  case TD_NOSV:
    return "a libc symbol libthread_db needs was not found";
  default:
    return "libthread_db error";
  }
}

gdbtrace::Error td_error(const char* what, td_err_e e) {
  return gdbtrace::make_error(EIO, std::string(what) + ": " + td_error_text(e) + " (td_err " +
                                       std::to_string(static_cast<int>(e)) + ")");
}

} // namespace

// --- proc_service: what libthread_db may ask of the debugger ---
// Only reads are needed for TLS lookups; writes are refused.

extern "C" {

ps_err_e ps_pdread(ps_prochandle* ph, psaddr_t addr, void* buf, size_t size) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = pread64(ph->mem_fd, static_cast<char*>(buf) + done, size - done,
                        reinterpret_cast<uint64_t>(addr) + done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return PS_ERR;
    done += n;
  }
  return PS_OK;
}

ps_err_e ps_pdwrite(ps_prochandle*, psaddr_t, const void*, size_t) {
  return PS_ERR;
}

ps_err_e ps_ptread(ps_prochandle* ph, psaddr_t addr, void* buf, size_t size) {
  return ps_pdread(ph, addr, buf, size);
}

ps_err_e ps_ptwrite(ps_prochandle*, psaddr_t, const void*, size_t) {
  return PS_ERR;
}

ps_err_e ps_lgetregs(ps_prochandle*, lwpid_t lwp, prgregset_t regs) {
  // elf_gregset_t has the layout of struct user_regs_struct.
  return ptrace(PTRACE_GETREGS, lwp, nullptr, regs) == 0 ? PS_OK : PS_ERR;
}

ps_err_e ps_lsetregs(ps_prochandle*, lwpid_t, const prgregset_t) {
  return PS_ERR;
}

ps_err_e ps_lgetfpregs(ps_prochandle*, lwpid_t lwp, prfpregset_t* regs) {
  return ptrace(PTRACE_GETFPREGS, lwp, nullptr, regs) == 0 ? PS_OK : PS_ERR;
}

ps_err_e ps_lsetfpregs(ps_prochandle*, lwpid_t, const prfpregset_t*) {
  return PS_ERR;
}

pid_t ps_getpid(ps_prochandle* ph) {
  return ph->pid;
}

// x86-64 threads: idx FS, the fs base. An i386 thread's pointer lives in the GDT
// entry its gs selector names (idx = gs >> 3): PTRACE_GET_THREAD_AREA, whose
// user_desc has the base address second, as gdbserver reads it.
ps_err_e ps_get_thread_area(ps_prochandle*, lwpid_t lwp, int idx, psaddr_t* base) {
  constexpr int kFs = 25; // <sys/reg.h> FS: the only thread area x86-64 has
  if (idx != kFs) {
    unsigned int desc[4];
    if (ptrace(PTRACE_GET_THREAD_AREA, lwp, reinterpret_cast<void*>(intptr_t(idx)), desc) != 0)
      return PS_ERR;
    *base = reinterpret_cast<psaddr_t>(uintptr_t(desc[1]));
    return PS_OK;
  }
  errno = 0;
  long fs = ptrace(PTRACE_PEEKUSER, lwp, offsetof(struct user_regs_struct, fs_base), nullptr);
  if (errno != 0)
    return PS_ERR;
  *base = reinterpret_cast<psaddr_t>(fs);
  return PS_OK;
}

// The object name (libc.so.6, ld-linux...) is not needed: the descriptors
// libthread_db asks for have unique names (gdb's qSymbol ignores it too).
ps_err_e ps_pglobal_lookup(ps_prochandle* ph, const char*, const char* name, psaddr_t* addr) {
  auto address = gdbtrace::find_mapped_symbol(ph->pid, name);
  if (!address)
    return PS_NOSYM;
  *addr = reinterpret_cast<psaddr_t>(*address);
  return PS_OK;
}

} // extern "C"

namespace gdbtrace {

namespace {

std::string& search_path_storage() {
  static std::string path = ThreadDb::kDefaultSearchPath;
  return path;
}

} // namespace

void ThreadDb::set_search_path(const std::string& path) {
  search_path_storage() = path.empty() ? kDefaultSearchPath : path;
}

const std::string& ThreadDb::search_path() {
  return search_path_storage();
}

// The library's entry points, looked up by name as gdbserver does, so a
// libthread_db from any directory of the search path can be used.
struct ThreadDb::Library {
  void* handle = nullptr;
  decltype(&td_init) init = nullptr;
  decltype(&td_ta_new) ta_new = nullptr;
  decltype(&td_ta_delete) ta_delete = nullptr;
  decltype(&td_ta_map_lwp2thr) map_lwp2thr = nullptr;
  decltype(&td_thr_tls_get_addr) tls_get_addr = nullptr;
  decltype(&td_thr_tlsbase) tlsbase = nullptr;

  ~Library() {
    if (handle)
      dlclose(handle);
  }

  // dlopen FILE ("libthread_db.so.1" searches the system's path); an error
  // says why when it is missing or lacks an entry point.
  static Result<std::unique_ptr<Library>> load(const std::string& file) {
    auto lib = std::make_unique<Library>();
    lib->handle = dlopen(file.c_str(), RTLD_NOW);
    if (!lib->handle)
      return make_error(ENOENT, dlerror());
    bool ok = lib->bind(lib->init, "td_init") && lib->bind(lib->ta_new, "td_ta_new") &&
              lib->bind(lib->ta_delete, "td_ta_delete") &&
              lib->bind(lib->map_lwp2thr, "td_ta_map_lwp2thr") &&
              lib->bind(lib->tls_get_addr, "td_thr_tls_get_addr") &&
              lib->bind(lib->tlsbase, "td_thr_tlsbase");
    if (!ok)
      return make_error(ENOENT, file + " lacks a libthread_db entry point");
    return lib;
  }

  template <typename F> bool bind(F& f, const char* name) {
    f = reinterpret_cast<F>(dlsym(handle, name));
    return f != nullptr;
  }
};

Result<std::unique_ptr<ThreadDb>> ThreadDb::open(pid_t pid) {
  std::unique_ptr<ThreadDb> db(new ThreadDb);
  db->handle_ = std::make_unique<ps_prochandle>();
  db->handle_->pid = pid;
  std::string mem = "/proc/" + std::to_string(pid) + "/mem";
  db->handle_->mem_fd = ::open(mem.c_str(), O_RDONLY | O_CLOEXEC);
  if (db->handle_->mem_fd < 0)
    return make_error(errno, "cannot open " + mem + ": " + std::strerror(errno));

  // Each directory of the search path in turn, as gdbserver's
  // thread_db_load_search: the first library that accepts the process wins;
  // "$pdir" is skipped (gdbserver does not know where libpthread lives either).
  std::string last_error;
  bool refused = false;
  const std::string& path = search_path();
  for (size_t start = 0; start <= path.size();) {
    size_t end = path.find(':', start);
    if (end == std::string::npos)
      end = path.size();
    std::string dir = path.substr(start, end - start);
    start = end + 1;
    if (dir.empty() || dir == "$pdir" || dir.starts_with("$pdir/"))
      continue;
    std::string file = dir == "$sdir" ? "libthread_db.so.1" : dir + "/libthread_db.so.1";
    auto lib = Library::load(file);
    if (!lib) {
      last_error = lib.error().message;
      continue;
    }
    if (td_err_e e = (*lib)->init(); e != TD_OK) {
      last_error = td_error("td_init", e).message;
      refused = true;
      continue;
    }
    if (td_err_e e = (*lib)->ta_new(db->handle_.get(), &db->agent_); e != TD_OK) {
      db->agent_ = nullptr;
      last_error = td_error("td_ta_new", e).message;
      refused = true;
      continue;
    }
    db->lib_ = std::move(*lib);
    return db;
  }
  if (refused) // a libthread_db was found; its reason is the useful one
    return make_error(EIO, last_error);
  return make_error(ENOENT, "no libthread_db found in libthread-db-search-path `" + path + "'" +
                                (last_error.empty() ? "" : " (" + last_error + ")"));
}

ThreadDb::~ThreadDb() {
  if (agent_ && lib_)
    lib_->ta_delete(agent_);
  if (handle_ && handle_->mem_fd >= 0)
    ::close(handle_->mem_fd);
}

Result<uint64_t> ThreadDb::tls_address(pid_t tid, uint64_t lm, uint64_t offset) {
  td_thrhandle_t th;
  if (td_err_e e = lib_->map_lwp2thr(agent_, tid, &th); e != TD_OK)
    return td_error("td_ta_map_lwp2thr", e);
  psaddr_t address = nullptr;
  if (lm == 0) {
    // A static executable has no link map (gdb sends LM 0): its TLS is module
    // 1's block, as gdbserver's thread_db_get_tls_address reads it.
    if (td_err_e e = lib_->tlsbase(&th, 1, &address); e != TD_OK)
      return td_error("td_thr_tlsbase", e);
    return reinterpret_cast<uint64_t>(address) + offset;
  }
  if (td_err_e e = lib_->tls_get_addr(&th, reinterpret_cast<psaddr_t>(lm), offset, &address);
      e != TD_OK)
    return td_error("td_thr_tls_get_addr", e);
  return reinterpret_cast<uint64_t>(address);
}

} // namespace gdbtrace
