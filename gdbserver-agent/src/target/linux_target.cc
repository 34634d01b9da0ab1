// LinuxTarget: processes, registers, memory, breakpoints, /proc information.
// Event handling and execution control are in linux_target_{wait,stops,resume}.cc.
#include "target/linux_target.h"

#include <algorithm>
#include <cstring>
#include <sstream>
#include <sys/ptrace.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "target/crash_cleanup.h"
#include "target/inferior_launch.h"
#include "target/proc_files.h"
#include "target/siginfo_compat.h"
#include "target/svr4_libraries.h"
#include "target/x86_registers.h"

namespace gdbtrace {
namespace {

constexpr uint8_t kInt3 = 0xcc;

std::string hex(uint64_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

Error no_process(Pid pid) {
  return make_error(ESRCH, "no such process " + std::to_string(pid) + " under the debugger");
}

} // namespace

std::unique_ptr<NativeTarget> make_linux_target(asio::io_context& io) {
  return std::make_unique<LinuxTarget>(io);
}

LinuxTarget::LinuxTarget(asio::io_context& io) : io_(io), sigchld_(io) {
  // SIGCHLD is consumed through a signalfd; it must be blocked in every thread
  // (threads created later inherit this mask).
  sigset_t block;
  sigemptyset(&block);
  sigaddset(&block, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &block, &child_sigmask_);
  sigdelset(&child_sigmask_, SIGCHLD);
  int fd = signalfd(-1, &block, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd >= 0)
    sigchld_.assign(fd);
  avx_ = x86::cpu_has_avx();
  arm_signalfd();
}

LinuxTarget::~LinuxTarget() {
  std::vector<Pid> pids = processes();
  for (Pid pid : pids) {
    if (find_process(pid)->attached)
      (void)detach(pid);
    else
      (void)kill(pid);
  }
  asio::error_code ec;
  sigchld_.close(ec);
}

// --- bookkeeping ---

Process* LinuxTarget::find_process(Pid pid) {
  auto it = procs_.find(pid);
  return it == procs_.end() ? nullptr : it->second.get();
}

const Process* LinuxTarget::find_process(Pid pid) const {
  auto it = procs_.find(pid);
  return it == procs_.end() ? nullptr : it->second.get();
}

Lwp* LinuxTarget::find_lwp(Tid tid, Process** owner) {
  for (auto& [pid, p] : procs_) {
    auto it = p->lwps.find(tid);
    if (it != p->lwps.end()) {
      if (owner)
        *owner = p.get();
      return &it->second;
    }
  }
  return nullptr;
}

Result<Lwp*> LinuxTarget::stopped_lwp(ThreadId thread) {
  Process* p = nullptr;
  Lwp* l = find_lwp(thread.tid, &p);
  if (!l || p->pid != thread.pid)
    return make_error(ESRCH, "unknown thread " + std::to_string(thread.tid));
  if (l->zombie)
    return make_error(ESRCH, "thread " + std::to_string(thread.tid) + " has exited");
  if (l->running)
    return make_error(EBUSY, "thread " + std::to_string(thread.tid) + " is running");
  return l;
}

// An exe that cannot be read (the process is already gone) keeps the host's layout.
RegisterArch executable_arch(Pid pid) {
  auto i386 = procfs::exe_is_i386(pid);
  return i386 && *i386 ? RegisterArch::I386 : RegisterArch::Amd64;
}

RegisterLayout LinuxTarget::register_layout(Pid pid) const {
  const Process* p = find_process(pid);
  return {p ? p->arch : RegisterArch::Amd64, avx_};
}

Process& LinuxTarget::add_process(Pid pid, bool attached) {
  auto p = std::make_unique<Process>();
  p->pid = pid;
  p->attached = attached;
  p->memory.open(pid);
  p->arch = executable_arch(pid);
  Process& ref = *p;
  procs_[pid] = std::move(p);
  publish_crash_table();
  return ref;
}

void LinuxTarget::remove_process(Pid pid) {
  procs_.erase(pid);
  unknown_stops_.erase(pid);
  if (procs_.empty())
    interrupt_requested_ = false; // nothing left to interrupt
  publish_crash_table();
}

// A clone/fork/vfork event collected but not interpreted yet (another
// thread's stop was reported first): the kernel already traces the new
// thread or process, stopped. It goes with its parent: detached (a fork child
// first loses the int3s it inherited) or killed.
void LinuxTarget::release_children_of_pending_events(Process& p, bool kill_them) {
  for (auto& [tid, l] : p.lwps) {
    if (!l.raw || !WIFSTOPPED(*l.raw))
      continue;
    int event = *l.raw >> 16;
    if (event != PTRACE_EVENT_CLONE && event != PTRACE_EVENT_FORK && event != PTRACE_EVENT_VFORK)
      continue;
    unsigned long msg = 0;
    if (ptrace(PTRACE_GETEVENTMSG, tid, nullptr, &msg) != 0)
      continue;
    Tid child = static_cast<Tid>(msg);
    int st = wait_new_child(child);
    if (!WIFSTOPPED(st))
      continue; // already gone
    if (kill_them && event != PTRACE_EVENT_CLONE) {
      ::kill(child, SIGKILL);
      ptrace(PTRACE_CONT, child, nullptr, nullptr);
      while (waitpid(child, &st, __WALL) == child && WIFSTOPPED(st))
        ptrace(PTRACE_CONT, child, nullptr, nullptr);
      continue;
    }
    if (event == PTRACE_EVENT_FORK) { // its own copy of the parent's memory, int3s included
      InferiorMemory memory;
      memory.open(child);
      for (const auto& [addr, bp] : p.breakpoints)
        (void)memory.write(addr, std::span<const uint8_t>(&bp.original, 1));
    }
    ptrace(PTRACE_DETACH, child, nullptr, nullptr);
  }
}

void LinuxTarget::publish_crash_table() {
  crash_cleanup::Publisher table;
  table.begin();
  for (const auto& [pid, p] : procs_) {
    table.add_process({pid, p->attached});
    for (const auto& [addr, bp] : p->breakpoints)
      table.add_breakpoint({pid, addr, bp.original});
  }
  table.commit();
}

// Fork children of PARENT that gdb never heard of go with it: killed with a
// killed parent, otherwise detached without our breakpoints (as an
// unreported fork is).
void LinuxTarget::release_unreported_forks(Pid parent, bool kill_them) {
  std::vector<Pid> children;
  for (const auto& [pid, p] : procs_)
    if (p->unreported_fork_of == parent)
      children.push_back(pid);
  for (Pid child : children) {
    if (kill_them) {
      (void)kill(child);
      continue;
    }
    Process& c = *find_process(child);
    lift_all_int3(c);
    for (auto& [tid, l] : c.lwps) {
      (void)apply_debug_registers(tid, DebugRegisters{});
      ptrace(PTRACE_DETACH, tid, nullptr, nullptr);
    }
    remove_process(child);
  }
}

Result<void> LinuxTarget::set_ptrace_options(Tid tid, bool attached) {
  long options = PTRACE_O_TRACECLONE | PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK |
                 PTRACE_O_TRACEVFORKDONE | PTRACE_O_TRACEEXEC | PTRACE_O_TRACESYSGOOD;
  if (!attached)
    options |= PTRACE_O_EXITKILL; // programs we started die with the server
  if (ptrace(PTRACE_SETOPTIONS, tid, nullptr, (void*)options) != 0)
    return make_error(errno,
                      "PTRACE_SETOPTIONS on " + std::to_string(tid) + ": " + std::strerror(errno));
  return ok();
}

// --- processes ---

Result<Pid> LinuxTarget::create_inferior(const LaunchSpec& spec) {
  auto pid = launch_inferior(spec, child_sigmask_);
  if (!pid)
    return pid.error();
  if (auto r = set_ptrace_options(*pid, false); !r) {
    ::kill(*pid, SIGKILL);
    int st;
    waitpid(*pid, &st, __WALL);
    return r.error();
  }
  Process& p = add_process(*pid, false);
  Lwp& l = p.lwps[*pid];
  l.tid = *pid;
  interrupt_pid_ = *pid;
  if (!non_stop_)
    reported_ = true;
  return *pid;
}

Result<void> LinuxTarget::attach(Pid pid) {
  if (find_process(pid))
    return make_error(EPERM, "already debugging process " + std::to_string(pid));
  if (!procfs::thread_exists(pid, pid))
    return make_error(ESRCH, "no such process: " + std::to_string(pid));
  Process& p = add_process(pid, true);
  interrupt_pid_ = pid;
  // Threads may be created while we attach: rescan until two scans in a row
  // see no thread that is new to us (as gdb's linux_proc_attach_tgid_threads),
  // counting one that exited before PTRACE_ATTACH as seen. A thread that
  // exited after it (its exit reaped while waiting for its stop) is forgotten
  // at once: with tids reused within seconds (pid_max 32768), a new thread
  // given its tid would pass for known, stay untraced and die of SIGTRAP at
  // the first breakpoint (gdb.threads/attach-many-short-lived-threads.exp).
  // Each scan sends every PTRACE_ATTACH before waiting, to keep up with chains
  // of threads that each create the next and exit.
  for (int clean_scans = 0, scans = 0; clean_scans < 2 && scans < 10000; scans++) {
    std::vector<Tid> attached;
    bool seen_new = false;
    for (Tid tid : procfs::task_ids(pid)) {
      if (p.lwps.count(tid))
        continue;
      seen_new = true;
      if (ptrace(PTRACE_ATTACH, tid, nullptr, nullptr) != 0) {
        int e = errno;
        if (std::getenv("GDBTRACE_TARGET_DEBUG")) // EPERM: exiting; ESRCH: gone
          std::fprintf(stderr, "[target] attach %d: %s\n", tid, std::strerror(e));
        if (tid == pid) {
          remove_process(pid);
          return make_error(e, "cannot attach to process " + std::to_string(pid) + ": " +
                                   std::strerror(e));
        }
        continue;
      }
      Lwp& l = p.lwps[tid];
      l.tid = tid;
      l.running = true;
      ++run_epoch_;
      l.stop_expected = true; // PTRACE_ATTACH sends SIGSTOP
      attached.push_back(tid);
    }
    for (Tid tid : attached) {
      Lwp& l = p.lwps[tid];
      wait_for_stop(p, l);
      if (tid != pid && l.raw && !WIFSTOPPED(*l.raw))
        p.lwps.erase(tid); // exited and reaped: gdb never knew it
      else
        (void)set_ptrace_options(tid, true);
    }
    clean_scans = seen_new ? 0 : clean_scans + 1;
  }
  p.memory.open(pid);
  if (!non_stop_)
    reported_ = true;
  return ok();
}

// A signal that reached the leader before the attach's SIGSTOP (it was
// pending: gdb.threads/attach-into-signal.exp) left the leader in its
// signal-delivery stop; wait_for_stop kept that status for later. gdbserver
// reports it as the attach's stop, so gdb prints "received signal" and passes
// it on at the next resume (its `handle` settings); the SIGSTOP stays expected.
std::optional<int> LinuxTarget::take_attach_signal(Pid pid) {
  Process* p = find_process(pid);
  if (!p)
    return std::nullopt;
  auto it = p->lwps.find(pid);
  if (it == p->lwps.end() || !it->second.raw)
    return std::nullopt;
  Lwp& l = it->second;
  int st = *l.raw;
  if (!WIFSTOPPED(st) || (st >> 16) != 0)
    return std::nullopt;
  int sig = WSTOPSIG(st);
  if (sig == SIGSTOP || sig == SIGTRAP || sig == (SIGTRAP | 0x80))
    return std::nullopt;
  l.raw.reset();
  l.attach_signal = sig;
  return sig;
}

Result<void> LinuxTarget::detach(Pid pid) {
  Process* p = find_process(pid);
  if (!p)
    return no_process(pid);
  interrupt_requested_ = false; // a ^C queued for this session goes with it
  stop_threads(*p, nullptr);
  release_children_of_pending_events(*p, false);
  lift_all_int3(*p);
  p->breakpoints.clear();
  publish_crash_table();
  p->debug_regs = DebugRegisters{};
  for (auto& [tid, l] : p->lwps) {
    (void)apply_debug_registers(tid, p->debug_regs);
    int sig = 0;
    // Deliver a signal the thread stopped with and gdb never saw (not our traps/stops).
    if (l.raw && WIFSTOPPED(*l.raw) && (*l.raw >> 16) == 0) {
      int s = WSTOPSIG(*l.raw);
      if (s != SIGSTOP && s != SIGTRAP && s != (SIGTRAP | 0x80))
        sig = s;
    }
    if (l.attach_signal && program_signal(l.attach_signal))
      sig = l.attach_signal; // as gdbserver's get_detach_signal
    if (l.pending_signal)
      sig = l.pending_signal;
    if (l.stop_expected) // cancel the SIGSTOP still queued for it
      syscall(SYS_tgkill, pid, tid, SIGCONT);
    ptrace(PTRACE_DETACH, tid, nullptr, (void*)(long)sig);
  }
  remove_process(pid);
  release_unreported_forks(pid, false);
  return ok();
}

Result<void> LinuxTarget::kill(Pid pid) {
  Process* p = find_process(pid);
  if (!p)
    return no_process(pid);
  release_children_of_pending_events(*p, true);
  ::kill(pid, SIGKILL);
  // Reap every thread; the leader reports last, after all others are gone.
  for (auto& [tid, l] : p->lwps) {
    if (tid == pid)
      continue;
    int st;
    while (waitpid(tid, &st, __WALL) == tid && WIFSTOPPED(st))
      ptrace(PTRACE_CONT, tid, nullptr, nullptr);
  }
  for (;;) {
    int st;
    pid_t w = waitpid(pid, &st, __WALL);
    if (w != pid || WIFEXITED(st) || WIFSIGNALED(st))
      break;
    ptrace(PTRACE_CONT, pid, nullptr, nullptr);
  }
  remove_process(pid);
  release_unreported_forks(pid, true);
  return ok();
}

std::vector<Pid> LinuxTarget::processes() const {
  std::vector<Pid> out;
  for (const auto& [pid, p] : procs_)
    if (!hidden(*p))
      out.push_back(pid);
  return out;
}

bool LinuxTarget::is_attached(Pid pid) const {
  const Process* p = find_process(pid);
  return p && p->attached;
}

std::vector<ThreadInfo> LinuxTarget::threads() const {
  std::vector<ThreadInfo> out;
  for (const auto& [pid, p] : procs_) {
    if (hidden(*p))
      continue;
    // The leader first, as gdbserver lists it: gdb numbers threads in the order it
    // learns of them, and after tids wrap a thread's tid can be below the pid.
    auto add = [&out, pid = pid](Tid tid) {
      out.push_back({{pid, tid}, procfs::thread_name(pid, tid), procfs::thread_core(pid, tid)});
    };
    if (auto leader = p->lwps.find(pid); leader != p->lwps.end() && !leader->second.zombie)
      add(pid);
    for (const auto& [tid, l] : p->lwps)
      if (!l.zombie && tid != pid)
        add(tid);
  }
  return out;
}

bool LinuxTarget::thread_alive(ThreadId thread) const {
  const Process* p = find_process(thread.pid);
  if (!p)
    return false;
  auto it = p->lwps.find(thread.tid);
  return it != p->lwps.end() && !it->second.zombie && procfs::thread_exists(thread.pid, thread.tid);
}

void LinuxTarget::set_catch_syscalls(Pid pid, bool enabled, const std::vector<int>& syscalls) {
  if (Process* p = find_process(pid)) {
    p->catch_syscalls = enabled;
    p->syscalls = syscalls;
  }
}

// --- registers ---

Result<RegisterBlock> LinuxTarget::read_registers(ThreadId thread) {
  if (auto l = stopped_lwp(thread); !l)
    return l.error();
  return x86::read_registers(thread.tid, avx_);
}

Result<void> LinuxTarget::write_registers(ThreadId thread, const RegisterBlock& regs) {
  if (auto l = stopped_lwp(thread); !l)
    return l.error();
  return x86::write_registers(thread.tid, regs, avx_);
}

Result<std::string> LinuxTarget::read_siginfo(ThreadId thread) {
  if (auto l = stopped_lwp(thread); !l)
    return l.error();
  return read_thread_siginfo(thread.tid, register_layout(thread.pid).i386());
}

Result<void> LinuxTarget::write_siginfo(ThreadId thread, std::string_view data) {
  if (auto l = stopped_lwp(thread); !l)
    return l.error();
  return write_thread_siginfo(thread.tid, register_layout(thread.pid).i386(), data);
}

Result<uint64_t> LinuxTarget::tls_address(ThreadId thread, uint64_t offset, uint64_t lm) {
  auto l = stopped_lwp(thread);
  if (!l)
    return l.error();
  Process* p = find_process(thread.pid);
  if (!p->thread_db) { // retried on every request until the program's libc is ready
    auto db = ThreadDb::open(p->pid);
    if (!db)
      return db.error();
    p->thread_db = std::move(*db);
  }
  return p->thread_db->tls_address(thread.tid, lm, offset);
}

// --- memory (int3 bytes we inserted are hidden) ---

Result<size_t> LinuxTarget::read_memory(Pid pid, uint64_t address, std::span<uint8_t> out) {
  Process* p = find_process(pid);
  if (!p)
    return no_process(pid);
  auto n = p->memory.read(address, out);
  if (!n)
    return n;
  auto it = p->breakpoints.lower_bound(address);
  for (; it != p->breakpoints.end() && it->first < address + *n; ++it)
    out[it->first - address] = it->second.original;
  return n;
}

Result<size_t> LinuxTarget::write_memory(Pid pid, uint64_t address, std::span<const uint8_t> data) {
  Process* p = find_process(pid);
  if (!p)
    return no_process(pid);
  // What these bytes may change: the code window the re-arming compares (32
  // bytes from a breakpoint) and the instruction cached for the in-place step (16).
  uint64_t reach = SwBreakpoint::kCodeWindow - 1;
  for (auto it = p->breakpoints.lower_bound(address > reach ? address - reach : 0);
       it != p->breakpoints.end() && it->first < address + data.size(); ++it) {
    it->second.code_len = 0;
    if (it->first + 15 >= address)
      it->second.insn_len = 0;
  }
  auto first = p->breakpoints.lower_bound(address);
  auto last = p->breakpoints.lower_bound(address + data.size());
  if (first == last)
    return p->memory.write(address, data);
  // New bytes under an int3 become its shadow; memory keeps the int3.
  std::vector<uint8_t> patched(data.begin(), data.end());
  for (auto it = first; it != last; ++it)
    patched[it->first - address] = kInt3;
  auto n = p->memory.write(address, patched);
  if (!n)
    return n;
  for (auto it = first; it != last; ++it)
    if (it->first < address + *n) {
      it->second.original = data[it->first - address];
      crash_cleanup::breakpoint_set({p->pid, it->first, it->second.original});
    }
  return n;
}

// --- software breakpoints ---

bool LinuxTarget::int3_inserted(const Process& p, uint64_t address) const {
  return p.breakpoints.count(address) != 0;
}

Result<void> LinuxTarget::insert_int3(Process& p, uint64_t address) {
  if (p.breakpoints.count(address))
    return ok();
  std::array<uint8_t, SwBreakpoint::kCodeWindow> code{};
  auto r = p.memory.read(address, std::span<uint8_t>(code));
  if (!r)
    return make_error(r.error().code,
                      "cannot insert breakpoint at " + hex(address) + ": " + r.error().message);
  uint8_t original = code[0];
  uint8_t int3 = kInt3;
  auto w = p.memory.write(address, std::span<const uint8_t>(&int3, 1));
  if (!w)
    return make_error(w.error().code,
                      "cannot insert breakpoint at " + hex(address) + ": " + w.error().message);
  SwBreakpoint& bp = p.breakpoints[address];
  bp.original = original;
  bp.code = code;
  bp.code[0] = kInt3;
  bp.code_len = static_cast<uint8_t>(*r);
  crash_cleanup::breakpoint_set({p.pid, address, original});
  return ok();
}

Result<void> LinuxTarget::remove_int3(Process& p, uint64_t address) {
  auto it = p.breakpoints.find(address);
  if (it == p.breakpoints.end())
    return ok();
  uint8_t original = it->second.original;
  p.breakpoints.erase(it);
  p.removed_breakpoints.insert(address);
  crash_cleanup::breakpoint_removed(p.pid, address);
  auto w = p.memory.write(address, std::span<const uint8_t>(&original, 1));
  if (!w)
    return make_error(w.error().code,
                      "cannot remove breakpoint at " + hex(address) + ": " + w.error().message);
  return ok();
}

Result<void> LinuxTarget::release_sw_breakpoint(Process& p, uint64_t address) {
  auto it = p.breakpoints.find(address);
  if (it != p.breakpoints.end() && !it->second.wanted())
    return remove_int3(p, address);
  return ok();
}

Result<void> LinuxTarget::update_debug_registers(Process& p, const DebugRegisters& next) {
  // Every thread must be stopped to take the new values.
  std::vector<Tid> stopped = stop_threads(p, nullptr);
  DebugRegisters previous = p.debug_regs;
  p.debug_regs = next;
  Result<void> result = ok();
  for (auto& [tid, l] : p.lwps) {
    auto r = apply_debug_registers(tid, next);
    if (!r && procfs::thread_exists(p.pid, tid)) {
      result = r;
      break;
    }
  }
  if (!result) { // roll back so threads and mirror agree
    p.debug_regs = previous;
    for (auto& [tid, l] : p.lwps)
      (void)apply_debug_registers(tid, previous);
  }
  restart_threads(p.pid, stopped);
  return result;
}

namespace {
// The debug-register condition of a hardware breakpoint or watchpoint (read
// watchpoints are refused before: x86 cannot watch reads only).
DebugAccess debug_access(BreakpointType type) {
  return type == BreakpointType::Hardware     ? DebugAccess::Execute
         : type == BreakpointType::WriteWatch ? DebugAccess::Write
                                              : DebugAccess::ReadWrite;
}
} // namespace

Result<void> LinuxTarget::insert_breakpoint(Pid pid, BreakpointType type, uint64_t address,
                                            int kind) {
  Process* p = find_process(pid);
  if (!p)
    return no_process(pid);
  if (type == BreakpointType::Software) {
    if (kind != 1)
      return make_error(EINVAL,
                        "x86 software breakpoints have kind 1, not " + std::to_string(kind));
    if (auto r = insert_int3(*p, address); !r)
      return r;
    p->breakpoints[address].user = true;
    return ok();
  }
  if (type == BreakpointType::ReadWatch)
    return make_error(EOPNOTSUPP, "x86 debug registers cannot watch reads only "
                                  "(use an access watchpoint)");
  if (!debug_register_traps_delivered())
    return debug_registers_not_delivered_error();
  DebugRegisters next = p->debug_regs;
  if (auto r = next.insert(debug_access(type), address, kind > 0 ? kind : 1); !r)
    return r;
  return update_debug_registers(*p, next);
}

Result<void> LinuxTarget::remove_breakpoint(Pid pid, BreakpointType type, uint64_t address,
                                            int kind) {
  Process* p = find_process(pid);
  if (!p)
    return no_process(pid);
  if (type == BreakpointType::Software) {
    auto it = p->breakpoints.find(address);
    if (it == p->breakpoints.end() || !it->second.user)
      return make_error(ENOENT, "no breakpoint at " + hex(address));
    it->second.user = false;
    return release_sw_breakpoint(*p, address);
  }
  if (type == BreakpointType::ReadWatch)
    return make_error(EOPNOTSUPP, "x86 debug registers cannot watch reads only");
  DebugRegisters next = p->debug_regs;
  if (auto r = next.remove(debug_access(type), address, kind > 0 ? kind : 1); !r)
    return r;
  return update_debug_registers(*p, next);
}

std::optional<uint64_t> LinuxTarget::stopped_epoch(Pid pid) const {
  auto it = procs_.find(pid);
  if (it == procs_.end())
    return std::nullopt;
  for (const auto& [tid, l] : it->second->lwps)
    if (l.running && !l.zombie)
      return std::nullopt;
  return run_epoch_;
}

Result<void> LinuxTarget::insert_trace_breakpoint(Pid pid, uint64_t address,
                                                  TraceHitCallback callback) {
  Process* p = find_process(pid);
  if (!p)
    return no_process(pid);
  if (!callback)
    return make_error(EINVAL, "trace breakpoint without a callback");
  if (auto r = insert_int3(*p, address); !r)
    return r;
  p->breakpoints[address].trace = std::move(callback);
  return ok();
}

Result<void> LinuxTarget::remove_trace_breakpoint(Pid pid, uint64_t address) {
  Process* p = find_process(pid);
  if (!p)
    return no_process(pid);
  auto it = p->breakpoints.find(address);
  if (it == p->breakpoints.end() || !it->second.trace)
    return make_error(ENOENT, "no trace breakpoint at " + hex(address));
  it->second.trace = nullptr;
  return release_sw_breakpoint(*p, address);
}

// --- process information ---

Result<std::string> LinuxTarget::auxv(Pid pid) {
  return procfs::read_file("/proc/" + std::to_string(pid) + "/auxv");
}

Result<std::string> LinuxTarget::exec_file(Pid pid) {
  return procfs::exe_path(pid);
}

Result<std::vector<LibraryInfo>> LinuxTarget::libraries(Pid pid, uint64_t& r_debug_lm_out) {
  if (!find_process(pid))
    return no_process(pid);
  auto aux = auxv(pid);
  if (!aux)
    return aux.error();
  MemoryReader reader = [this, pid](uint64_t a, std::span<uint8_t> out) {
    return read_memory(pid, a, out);
  };
  auto snap = read_link_map(*aux, reader);
  if (!snap)
    return snap.error();
  r_debug_lm_out = snap->main_lm;
  return std::move(snap->libraries);
}

} // namespace gdbtrace
