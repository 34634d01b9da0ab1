// The crash path: only raw syscalls on a table published ahead of time (no
// allocation, no locks, no stdio), see crash_cleanup.h.
#include "target/crash_cleanup.h"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstddef>
#include <cstring>
#include <fcntl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <unordered_map>

namespace gdbtrace::crash_cleanup {
namespace {

constexpr int kMaxProcesses = 256;
constexpr int kMaxBreakpoints = 65536; // the eBPF and module collectors' per-run maximum

struct Table {
  ProcessEntry procs[kMaxProcesses];
  int nprocs = 0;
  BreakpointEntry bps[kMaxBreakpoints];
  int nbps = 0;
  unsigned dropped = 0;
};

// Double buffered: the handler reads the committed slot while the target
// fills the other one, so an interrupted publish never shows a torn table.
Table tables[2];
std::atomic<int> committed{-1};
// The stub itself: a child forked to start a program inherits the handlers
// until its exec, and must not touch our tracees if it crashes meanwhile.
pid_t owner_pid = 0;
std::atomic<void (*)()> before_detach{nullptr};

// Where each published int3 is in the tables, for the O(1) updates: outside
// an update both tables hold the same entries at the same positions. Used by
// the target only, never by the handler.
struct SiteHash {
  size_t operator()(const std::pair<pid_t, uint64_t>& k) const {
    return std::hash<uint64_t>()(k.second * 31 + uint64_t(k.first));
  }
};
std::unordered_map<std::pair<pid_t, uint64_t>, int, SiteHash> positions;

// Applies OP to the spare table, publishes it, then to the other one.
template <class Op> void update(Op op) {
  int cur = committed.load(std::memory_order_acquire);
  if (cur < 0) { // nothing published yet: start from an empty table
    Publisher empty;
    empty.begin();
    empty.commit();
    cur = committed.load(std::memory_order_acquire);
  }
  op(tables[1 - cur]);
  committed.store(1 - cur, std::memory_order_release);
  op(tables[cur]);
}

long raw_ptrace(long request, pid_t tid, unsigned long addr, unsigned long data) {
  return syscall(SYS_ptrace, request, tid, addr, data);
}

// "/proc/<pid>" plus SUFFIX into BUF (no snprintf in a signal handler).
void proc_path(char* buf, size_t size, pid_t pid, const char* suffix) {
  char digits[16];
  int n = 0;
  unsigned v = static_cast<unsigned>(pid);
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v && n < 15);
  size_t len = 0;
  for (const char* s = "/proc/"; *s && len + 1 < size; s++)
    buf[len++] = *s;
  while (n > 0 && len + 1 < size)
    buf[len++] = digits[--n];
  for (const char* s = suffix; *s && len + 1 < size; s++)
    buf[len++] = *s;
  buf[len] = '\0';
}

bool is_breakpoint(const Table& t, pid_t pid, uint64_t address) {
  for (int i = 0; i < t.nbps; i++)
    if (t.bps[i].pid == pid && t.bps[i].address == address)
      return true;
  return false;
}

void restore_original_bytes(const Table& t, pid_t pid) {
  char path[64];
  proc_path(path, sizeof path, pid, "/mem");
  int fd = static_cast<int>(syscall(SYS_openat, AT_FDCWD, path, O_RDWR | O_CLOEXEC));
  if (fd < 0)
    return;
  for (int i = 0; i < t.nbps; i++)
    if (t.bps[i].pid == pid)
      (void)syscall(SYS_pwrite64, fd, &t.bps[i].original, 1, t.bps[i].address);
  syscall(SYS_close, fd);
}

// Brings running thread TID into a ptrace-stop: a SIGSTOP, then its stop (or
// whatever event it reports first) waited for, polling for at most ~200 ms (a
// thread that cannot stop, a zombie say, must not hang the crash path). The
// SIGSTOP, if another event came first, stays pending: detach_process's
// SIGCONT discards it.
bool stop_running_thread(pid_t pid, pid_t tid) {
  if (syscall(SYS_tgkill, pid, tid, SIGSTOP) != 0)
    return false;
  for (int i = 0; i < 200; i++) {
    int status = 0;
    long w = syscall(SYS_wait4, tid, &status, __WALL | WNOHANG, nullptr);
    if (w == tid)
      return WIFSTOPPED(status);
    if (w < 0)
      return false;
    struct timespec ms = {0, 1000 * 1000};
    syscall(SYS_nanosleep, &ms, nullptr);
  }
  return false;
}

// Detaches one thread from its ptrace-stop. A running thread is stopped first:
// gdb's hardware breakpoints and watchpoints live in its debug registers, which
// only a stopped tracee's can be cleared, and left armed in a detached program
// they kill it with SIGTRAP at the next hit.
void detach_thread(const Table& t, pid_t pid, pid_t tid) {
  user_regs_struct regs;
  if (raw_ptrace(PTRACE_GETREGS, tid, 0, reinterpret_cast<unsigned long>(&regs)) != 0) {
    if (!stop_running_thread(pid, tid) ||
        raw_ptrace(PTRACE_GETREGS, tid, 0, reinterpret_cast<unsigned long>(&regs)) != 0)
      return; // gone, or not stopping: left to the kernel's detach at our exit
  }
  int sig = 0;
  siginfo_t si;
  std::memset(&si, 0, sizeof si);
  if (raw_ptrace(PTRACE_GETSIGINFO, tid, 0, reinterpret_cast<unsigned long>(&si)) == 0) {
    if (si.si_signo == SIGTRAP) {
      // A hit of our int3 not collected yet: the pc is one past it.
      bool int3_hit = (si.si_code == SI_KERNEL || si.si_code == TRAP_BRKPT) &&
                      is_breakpoint(t, pid, regs.rip - 1);
      if (int3_hit) {
        regs.rip -= 1;
        raw_ptrace(PTRACE_SETREGS, tid, 0, reinterpret_cast<unsigned long>(&regs));
      }
    } else if (si.si_signo != SIGSTOP) {
      sig = si.si_signo; // the program's own signal, not seen by gdb yet
    }
  }
  raw_ptrace(PTRACE_POKEUSER, tid, offsetof(struct user, u_debugreg[7]), 0);
  raw_ptrace(PTRACE_DETACH, tid, 0, static_cast<unsigned long>(sig));
}

struct Dirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[1];
};

void detach_process(const Table& t, pid_t pid) {
  char path[64];
  proc_path(path, sizeof path, pid, "/task");
  int fd =
      static_cast<int>(syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd < 0)
    return;
  alignas(8) char buf[4096];
  for (;;) {
    long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
    if (n <= 0)
      break;
    for (long off = 0; off < n;) {
      auto* d = reinterpret_cast<Dirent64*>(buf + off);
      off += d->d_reclen;
      pid_t tid = 0;
      const char* c = d->d_name;
      for (; *c >= '0' && *c <= '9'; c++)
        tid = tid * 10 + (*c - '0');
      if (tid > 0 && *c == '\0')
        detach_thread(t, pid, tid);
    }
  }
  syscall(SYS_close, fd);
  // A SIGSTOP we sent and the thread has not taken yet would stop the
  // detached program for good; SIGCONT discards pending stop signals.
  syscall(SYS_kill, pid, SIGCONT);
}

void write_stderr(const char* s) {
  (void)syscall(SYS_write, 2, s, std::strlen(s));
}

void on_fatal_signal(int sig) {
  if (syscall(SYS_getpid) != owner_pid) {
    syscall(SYS_tgkill, syscall(SYS_getpid), syscall(SYS_gettid), sig);
    return;
  }
  write_stderr("gdbtrace-server: fatal signal: removing breakpoints, detaching attached "
               "processes, killing started ones\n");
  run();
  // SA_RESETHAND restored the default action; the signal is blocked until we
  // return, then it terminates us (with a core dump where enabled).
  syscall(SYS_tgkill, syscall(SYS_getpid), syscall(SYS_gettid), sig);
}

} // namespace

void Publisher::begin() {
  slot_ = committed.load(std::memory_order_acquire) == 0 ? 1 : 0;
  tables[slot_].nprocs = 0;
  tables[slot_].nbps = 0;
  tables[slot_].dropped = 0;
}

void Publisher::add_process(const ProcessEntry& p) {
  Table& t = tables[slot_];
  if (t.nprocs < kMaxProcesses)
    t.procs[t.nprocs++] = p;
  else
    t.dropped++;
}

void Publisher::add_breakpoint(const BreakpointEntry& b) {
  Table& t = tables[slot_];
  if (t.nbps < kMaxBreakpoints)
    t.bps[t.nbps++] = b;
  else
    t.dropped++;
}

void Publisher::commit() {
  committed.store(slot_, std::memory_order_release);
  // The other table becomes the same, for update() (a full rebuild is rare:
  // a process came or went).
  const Table& t = tables[slot_];
  Table& other = tables[1 - slot_];
  std::copy(t.procs, t.procs + t.nprocs, other.procs);
  other.nprocs = t.nprocs;
  std::copy(t.bps, t.bps + t.nbps, other.bps);
  other.nbps = t.nbps;
  other.dropped = t.dropped;
  positions.clear();
  for (int i = 0; i < t.nbps; i++)
    positions[{t.bps[i].pid, t.bps[i].address}] = i;
}

void breakpoint_set(const BreakpointEntry& b) {
  auto it = positions.find({b.pid, b.address});
  if (it != positions.end()) {
    int i = it->second;
    update([&](Table& t) { t.bps[i].original = b.original; });
    return;
  }
  int cur = committed.load(std::memory_order_acquire);
  int n = cur < 0 ? 0 : tables[cur].nbps;
  if (n >= kMaxBreakpoints) {
    update([](Table& t) { t.dropped++; });
    return;
  }
  update([&](Table& t) {
    t.bps[n] = b;
    t.nbps = n + 1;
  });
  positions[{b.pid, b.address}] = n;
}

void breakpoint_removed(pid_t pid, uint64_t address) {
  auto it = positions.find({pid, address});
  if (it == positions.end())
    return;
  int i = it->second;
  int last = tables[committed.load(std::memory_order_acquire)].nbps - 1;
  BreakpointEntry moved = tables[committed.load(std::memory_order_acquire)].bps[last];
  update([&](Table& t) {
    t.bps[i] = moved;
    t.nbps = last;
  });
  positions.erase(it);
  if (i != last)
    positions[{moved.pid, moved.address}] = i;
}

unsigned dropped() {
  int cur = committed.load(std::memory_order_acquire);
  return cur < 0 ? 0 : tables[cur].dropped;
}

void set_before_detach(void (*fn)()) {
  before_detach.store(fn, std::memory_order_release);
}

void run() {
  if (auto fn = before_detach.load(std::memory_order_acquire))
    fn();
  int cur = committed.load(std::memory_order_acquire);
  if (cur < 0)
    return;
  const Table& t = tables[cur];
  // Bytes first, everywhere: from then on no thread can hit our int3.
  for (int i = 0; i < t.nprocs; i++)
    restore_original_bytes(t, t.procs[i].pid);
  for (int i = 0; i < t.nprocs; i++) {
    if (t.procs[i].pid <= 0)
      continue; // kill() would reach a whole process group
    if (t.procs[i].attached)
      detach_process(t, t.procs[i].pid);
    else
      syscall(SYS_kill, t.procs[i].pid, SIGKILL);
  }
}

void install_handlers() {
  owner_pid = getpid();
  static char alt_stack[64 * 1024];
  stack_t ss{};
  ss.ss_sp = alt_stack;
  ss.ss_size = sizeof alt_stack;
  sigaltstack(&ss, nullptr);
  struct sigaction sa {};
  sa.sa_handler = on_fatal_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND | SA_ONSTACK;
  for (int sig : {SIGSEGV, SIGABRT, SIGBUS, SIGILL, SIGFPE})
    sigaction(sig, &sa, nullptr);
}

} // namespace gdbtrace::crash_cleanup
