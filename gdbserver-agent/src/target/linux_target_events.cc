// LinuxTarget: collecting wait statuses, interpreting them, stopping and
// resuming threads (all-stop / non-stop), stepping over breakpoints and
// running trace-breakpoint callbacks.
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/ptrace.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "target/linux_target.h"
#include "target/proc_files.h"
#include "target/step_in_place.h"
#include "target/x86_registers.h"

namespace gdbtrace {
namespace {

constexpr int kSyscallTrap = SIGTRAP | 0x80;
constexpr unsigned long long kEflagsTrap = 0x100; // TF
constexpr int stop_status(int sig) {
  return (sig << 8) | 0x7f;
}

bool is_plain_sigstop(int st) {
  return WIFSTOPPED(st) && WSTOPSIG(st) == SIGSTOP && (st >> 16) == 0;
}

StopEvent signal_event(Pid pid, Tid tid, int sig, StopReason reason = StopReason::None) {
  StopEvent e;
  e.kind = StopKind::Signalled;
  e.thread = {pid, tid};
  e.signal = sig;
  e.reason = reason;
  return e;
}

// GDBTRACE_TARGET_DEBUG=1 traces every collected status and report on stderr.
bool debug_enabled() {
  static const bool on = std::getenv("GDBTRACE_TARGET_DEBUG") != nullptr;
  return on;
}

bool is_stepping(const Lwp& l) {
  return l.kind == ResumeKind::Step || l.kind == ResumeKind::RangeStep;
}

} // namespace

// --- collecting statuses ---

void LinuxTarget::arm_signalfd() {
  if (!sigchld_.is_open())
    return;
  std::weak_ptr<int> alive = life_;
  sigchld_.async_wait(asio::posix::stream_descriptor::wait_read,
                      [this, alive](const asio::error_code& ec) {
                        if (ec || alive.expired())
                          return;
                        on_sigchld();
                      });
}

void LinuxTarget::on_sigchld() {
  // SIGCHLD is a standard signal: at most one is pending, so one read empties
  // the signalfd (one that arrives after it makes the fd readable again).
  signalfd_siginfo info[4];
  (void)!::read(sigchld_.native_handle(), info, sizeof info);
  collect_statuses(true);
  dispatch();
  arm_signalfd();
}

void LinuxTarget::collect_statuses(bool sigchld) {
  bool reaped = false;
  for (;;) {
    int st = 0;
    pid_t w = waitpid(-1, &st, WNOHANG | __WALL);
    if (w <= 0)
      break;
    Process* p = nullptr;
    Lwp* l = find_lwp(w, &p);
    if (!l) {
      if (debug_enabled())
        std::fprintf(stderr, "[target] unknown %d status 0x%x\n", w, st);
      // A new clone/fork child can stop before its parent's event is seen.
      if (WIFSTOPPED(st))
        unknown_stops_[w] = st;
      continue;
    }
    reaped = true;
    store_status(*p, *l, st);
  }
  if (sigchld && !reaped)
    zombie_suspect_ = true; // a SIGCHLD with nothing to reap
  if (zombie_suspect_)
    zombie_suspect_ = note_zombie_leaders();
  else if (reaped)
    check_leaders_later();
}

// A leader's exit and another thread's stop can come as one SIGCHLD (it does
// not queue), and the round then reaps a status. Where that leaves a leader
// alone running, look at it a little later rather than at every such round:
// that is every hit of a ptrace tracepoint in a one-worker program.
void LinuxTarget::check_leaders_later() {
  if (leader_check_armed_)
    return;
  bool lone_leader = std::any_of(procs_.begin(), procs_.end(), [](const auto& kv) {
    const auto& p = *kv.second;
    auto it = p.lwps.find(kv.first);
    if (it == p.lwps.end() || p.lwps.size() < 2 || !it->second.running || it->second.zombie)
      return false;
    return std::none_of(p.lwps.begin(), p.lwps.end(), [&](const auto& l) {
      return &l.second != &it->second && l.second.running;
    });
  });
  if (!lone_leader)
    return;
  leader_check_armed_ = true;
  leader_check_.expires_after(std::chrono::milliseconds(20));
  std::weak_ptr<int> alive = life_;
  leader_check_.async_wait([this, alive](const asio::error_code& ec) {
    if (ec || alive.expired())
      return;
    leader_check_armed_ = false;
    zombie_suspect_ = true;
    post_dispatch();
  });
}

// A leader that exits while other threads live becomes a zombie the kernel
// never reports to waitpid until the group ends; the tracer only gets a
// SIGCHLD with nothing to reap. Like gdbserver's check_zombie_leaders, stop
// waiting for it: gdb, resuming only the leader (scheduler locking), then
// sees no resumed thread left ('N') and the leader gone from the thread list.
// Asked only after such a SIGCHLD, and while no other thread of the process
// runs (the case where gdb would wait forever): a busy traced process costs no
// /proc read per event. True while a leader could not be asked yet (others
// ran): the next statuses ask again.
bool LinuxTarget::note_zombie_leaders() {
  bool undecided = false;
  for (auto& [pid, p] : procs_) {
    auto it = p->lwps.find(pid);
    if (it == p->lwps.end() || p->lwps.size() < 2)
      continue;
    Lwp& leader = it->second;
    if (!leader.running || leader.zombie || leader.raw)
      continue;
    bool others_run = std::any_of(p->lwps.begin(), p->lwps.end(), [&](const auto& kv) {
      return &kv.second != &leader && kv.second.running;
    });
    if (others_run) {
      undecided = true;
    } else if (procfs::thread_state(pid, pid) == 'Z') {
      leader.running = false;
      leader.zombie = true;
    }
  }
  return undecided;
}

void LinuxTarget::store_status(Process& p, Lwp& l, int status) {
  if (debug_enabled())
    std::fprintf(stderr, "[target] %d/%d status 0x%x resumed=%d\n", p.pid, l.tid, status,
                 l.resumed);
  if (l.tid == p.pid && (status >> 16) == PTRACE_EVENT_EXEC)
    take_over_exec_thread(p, l);
  l.running = false;
  l.raw = status;
  classify_trap(p, l);
}

// An exec in a thread that is not the leader is reported with the leader's
// tid (the kernel gives it to the exec'ing thread): the event belongs to the
// thread gdb resumed, which may not be the leader (scheduler locking, or a
// leader that already exited), so the leader's entry takes over its state.
void LinuxTarget::take_over_exec_thread(Process& p, Lwp& leader) {
  unsigned long former = 0;
  if (ptrace(PTRACE_GETEVENTMSG, leader.tid, nullptr, &former) != 0 || (Tid)former == leader.tid)
    return;
  auto it = p.lwps.find(static_cast<Tid>(former));
  if (it == p.lwps.end())
    return;
  const Lwp& execer = it->second;
  leader.resumed = execer.resumed;
  leader.kind = execer.kind;
  leader.range_start = execer.range_start;
  leader.range_end = execer.range_end;
  leader.stop_expected = execer.stop_expected;
  leader.zombie = false;
  p.lwps.erase(it);
}

void LinuxTarget::classify_trap(Process& p, Lwp& l) {
  l.trap = TrapKind::None;
  int st = *l.raw;
  if (!WIFSTOPPED(st) || WSTOPSIG(st) != SIGTRAP || (st >> 16) != 0)
    return;
  siginfo_t si{};
  ptrace(PTRACE_GETSIGINFO, l.tid, nullptr, &si);
  auto pc = x86::read_pc(l.tid);
  if ((si.si_code == SI_KERNEL || si.si_code == TRAP_BRKPT) && pc && int3_inserted(p, *pc - 1)) {
    // Rewind now: whatever happens to the breakpoint later, pc is right.
    (void)x86::write_pc(l.tid, *pc - 1);
    l.trap = TrapKind::SwBreak;
    l.trap_address = *pc - 1;
    return;
  }
  if (si.si_code == SI_KERNEL && pc && p.removed_breakpoints.count(*pc - 1)) {
    uint8_t byte = 0;
    auto r = p.memory.read(*pc - 1, std::span<uint8_t>(&byte, 1));
    if (r && *r == 1 && byte != 0xcc) { // our int3, removed after it was executed
      (void)x86::write_pc(l.tid, *pc - 1);
      l.trap = TrapKind::SwBreak; // on_trap finds no breakpoint and resumes
      l.trap_address = *pc - 1;
      return;
    }
  }
  // Read only now: an int3 hit (every trace hit) needs no debug-status register.
  uint64_t dr6 = read_dr6(l.tid);
  if (dr6 & 0xf) {
    unsigned slot = __builtin_ctzll(dr6 & 0xf);
    clear_dr6(l.tid);
    l.trap_address = p.debug_regs.address[slot];
    switch (p.debug_regs.slot_access(slot)) {
    case DebugAccess::Execute:
      l.trap = TrapKind::HwBreak;
      break;
    case DebugAccess::Write:
      l.trap = TrapKind::Watch;
      break;
    case DebugAccess::ReadWrite:
      l.trap = TrapKind::AccessWatch;
      break;
    }
    return;
  }
  // A step onto a kernel uprobe (an in-kernel collector's tracepoint): the
  // kernel runs the probed instruction out of line or emulates it, and ends
  // the step with a SIGTRAP the thread sends itself (SI_USER, si_pid its own
  // tgid) rather than a debug trap. It is the end of that step, not a signal.
  bool uprobe_step_end = l.single_stepped && si.si_code == SI_USER && si.si_pid == p.pid;
  if (si.si_code == TRAP_TRACE || (dr6 & kDr6SingleStep) || uprobe_step_end) {
    if (dr6)
      clear_dr6(l.tid);
    l.trap = TrapKind::Step;
    return;
  }
  l.trap = TrapKind::Other;
}

// --- dispatching ---

void LinuxTarget::post_dispatch() {
  if (dispatch_posted_)
    return;
  dispatch_posted_ = true;
  std::weak_ptr<int> alive = life_;
  asio::post(io_, [this, alive] {
    if (alive.expired())
      return;
    dispatch_posted_ = false;
    collect_statuses();
    dispatch();
  });
}

void LinuxTarget::place_report(const StopEvent& ev) {
  Process* p = find_process(ev.thread.pid);
  bool thread_gone = ev.kind == StopKind::Exited || ev.kind == StopKind::Terminated ||
                     ev.kind == StopKind::ThreadExited;
  Lwp* l = p ? find_lwp(ev.thread.tid) : nullptr;
  if (l && !thread_gone)
    l->report = ev;
  else
    orphan_reports_.push_back(ev);
}

void LinuxTarget::interpret_pending() {
  for (bool again = true; again;) {
    again = false;
    for (auto& [pid, p] : procs_) {
      // The leader's exit ends the process: its other threads' collected
      // statuses (their exits) come first.
      Pid leader = pid; // (clang < 16 cannot capture a structured binding)
      bool others_pending = std::any_of(p->lwps.begin(), p->lwps.end(), [&](const auto& kv) {
        return kv.first != leader && kv.second.raw && kv.second.resumed;
      });
      for (auto& [tid, l] : p->lwps) {
        bool leader_exit = tid == pid && l.raw && !WIFSTOPPED(*l.raw);
        // The process's end is reported once gdb waits, even if it resumed
        // only another thread (stepping one over a breakpoint, say, when the
        // process was killed from outside).
        bool wanted = l.resumed || (leader_exit && waiting_);
        if (l.raw && wanted && !l.report && !(leader_exit && others_pending)) {
          auto ev = interpret(*p, l); // may add/remove threads and processes
          if (ev)
            place_report(*ev);
          again = true;
          break;
        }
      }
      if (again)
        break;
    }
  }
}

std::optional<StopEvent> LinuxTarget::take_report() {
  if (!orphan_reports_.empty()) {
    StopEvent ev = orphan_reports_.front();
    orphan_reports_.pop_front();
    return ev;
  }
  // Round-robin over threads with a report, starting after the last reported one.
  Lwp* first = nullptr;
  Lwp* after_last = nullptr;
  for (auto& [pid, p] : procs_)
    for (auto& [tid, l] : p->lwps)
      if (l.report && l.resumed) {
        if (!first)
          first = &l;
        if (!after_last && tid > last_reported_tid_)
          after_last = &l;
      }
  Lwp* pick = after_last ? after_last : first;
  if (!pick)
    return std::nullopt;
  StopEvent ev = *pick->report;
  ev.stop_requested = pick->report_stop_zero;
  pick->report.reset();
  pick->report_stop_zero = false;
  last_reported_tid_ = pick->tid;
  reveal_fork_child(ev);
  return ev;
}

// gdb learns of a fork child from its parent's event: from now on it is gdb's.
void LinuxTarget::reveal_fork_child(const StopEvent& ev) {
  if (ev.kind != StopKind::Forked && ev.kind != StopKind::VForked)
    return;
  if (Process* c = find_process(ev.child.pid))
    c->unreported_fork_of = 0;
}

bool LinuxTarget::anything_running() const {
  for (const auto& [pid, p] : procs_)
    for (const auto& [tid, l] : p->lwps)
      if (l.running || (l.resumed && (l.raw || l.report)))
        return true;
  return !orphan_reports_.empty();
}

void LinuxTarget::dispatch() {
  if (dispatching_) {
    redispatch_ = true;
    return;
  }
  dispatching_ = true;
  std::vector<StopEvent> out;
  do {
    redispatch_ = false;
    interpret_pending();
    if (non_stop_) {
      for (auto ev = take_report(); ev; ev = take_report()) {
        if (Lwp* l = find_lwp(ev->thread.tid))
          l->resumed = false;
        out.push_back(*ev);
      }
    } else if (!reported_) {
      if (auto ev = take_report()) {
        // All-stop: freeze everything else; their own events stay pending.
        stop_all_processes();
        for (auto& [pid, p] : procs_)
          for (auto& [tid, l] : p->lwps)
            l.resumed = false;
        reported_ = true;
        out.push_back(*ev);
      } else if (interrupt_due()) {
        if (!interrupt_all_stop(out))
          redispatch_ = true; // statuses collected while stopping come first
      } else if (waiting_ && !anything_running()) {
        StopEvent none;
        none.kind = StopKind::NoResumed;
        reported_ = true;
        out.push_back(none);
      }
    }
  } while (redispatch_);
  if (!out.empty())
    waiting_ = false;
  dispatching_ = false;
  for (const auto& ev : out) {
    if (debug_enabled())
      std::fprintf(stderr, "[target] report kind %d thread %d/%d signal %d reason %d\n",
                   (int)ev.kind, ev.thread.pid, ev.thread.tid, ev.signal, (int)ev.reason);
  }
  for (const auto& ev : out)
    if (handler_)
      handler_(ev);
}

// All-stop ^C: stops every thread. Returns false when that collected statuses
// of resumed threads (they are interpreted and reported first); otherwise
// reports SIGINT and returns true.
bool LinuxTarget::interrupt_all_stop(std::vector<StopEvent>& out) {
  stop_all_processes();
  for (const auto& [pid, p] : procs_)
    for (const auto& [tid, l] : p->lwps)
      if (l.resumed && l.raw)
        return false;
  interrupt_requested_ = false;
  auto ev = interrupt_event();
  for (auto& [pid, p] : procs_)
    for (auto& [tid, l] : p->lwps)
      l.resumed = false;
  reported_ = true;
  if (ev)
    out.push_back(*ev);
  return true;
}

// A ^C not answered yet waits while gdb single-steps threads of other
// processes only (a step over a breakpoint): gdbserver's SIGINT waits in the
// threads of the process started or attached last, so such a step finishes
// first and the ^C is reported in that process when gdb resumes it
// (gdb.threads/detach-step-over.exp). Any other resume answers it at once,
// whichever threads it runs (gdbserver would not see a SIGINT queued in a
// process gdb keeps stopped; we do not wait for it).
bool LinuxTarget::interrupt_due() const {
  if (!interrupt_requested_)
    return false;
  bool other_steps_only = false;
  for (const auto& [pid, p] : procs_)
    for (const auto& [tid, l] : p->lwps) {
      if (!l.resumed || l.zombie)
        continue;
      if (pid == interrupt_pid_ || l.kind == ResumeKind::Continue)
        return true;
      other_steps_only = true;
    }
  return !other_steps_only || !procs_.count(interrupt_pid_);
}

// The thread a ^C stop is reported for: one gdb resumed (a thread it was
// stepping over a breakpoint must not see another thread stop instead),
// preferring the process started or attached last (gdbserver signals that
// one's process group: gdb then stays on that inferior, and a `detach` after
// the ^C detaches it — gdb.threads/detach-step-over.exp), then the leader.
std::optional<StopEvent> LinuxTarget::interrupt_event() const {
  std::optional<StopEvent> any, resumed;
  int resumed_rank = -1;
  for (const auto& [pid, p] : procs_)
    for (const auto& [tid, l] : p->lwps) {
      if (l.zombie || hidden(*p))
        continue;
      if (!any)
        any = signal_event(pid, tid, SIGINT);
      int rank = (pid == interrupt_pid_ ? 2 : 0) + (tid == pid ? 1 : 0);
      if (l.resumed && rank > resumed_rank) {
        resumed = signal_event(pid, tid, SIGINT);
        resumed_rank = rank;
      }
    }
  return resumed ? resumed : any;
}

// --- interpreting one status ---

std::optional<StopEvent> LinuxTarget::interpret(Process& p, Lwp& l) {
  int st = *l.raw;
  l.raw.reset();
  if (WIFEXITED(st) || WIFSIGNALED(st))
    return on_exit_status(p, l, st);
  if (int event = st >> 16)
    return on_ptrace_event(p, l, event);
  int sig = WSTOPSIG(st);
  if (sig == kSyscallTrap)
    return on_syscall_stop(p, l);
  if (sig == SIGSTOP && l.stop_expected) {
    l.stop_expected = false;
    if (l.report_stop_zero)
      return signal_event(p.pid, l.tid, 0);
    resume_lwp(p, l);
    return std::nullopt;
  }
  if (sig == SIGTRAP)
    return on_trap(p, l);
  if (pass_signal(sig) && l.kind == ResumeKind::Continue) {
    l.pending_signal = sig;
    resume_lwp(p, l);
    return std::nullopt;
  }
  return signal_event(p.pid, l.tid, sig);
}

std::optional<StopEvent> LinuxTarget::on_exit_status(Process& p, Lwp& l, int status) {
  Pid pid = p.pid;
  Tid tid = l.tid;
  StopEvent ev;
  ev.thread = {pid, tid};
  if (tid == pid) {
    // The kernel reports the leader last: the whole process is gone.
    if (WIFEXITED(status)) {
      ev.kind = StopKind::Exited;
      ev.exit_status = WEXITSTATUS(status);
    } else {
      ev.kind = StopKind::Terminated;
      ev.signal = WTERMSIG(status);
    }
    remove_process(pid);
    release_unreported_forks(pid, false); // they run on, as unreported forks do
    return ev;
  }
  p.lwps.erase(tid);
  if (!report_thread_events_)
    return std::nullopt;
  ev.kind = StopKind::ThreadExited;
  ev.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
  return ev;
}

std::optional<StopEvent> LinuxTarget::on_ptrace_event(Process& p, Lwp& l, int event) {
  switch (event) {
  case PTRACE_EVENT_CLONE:
    return on_new_thread(p, l);
  case PTRACE_EVENT_FORK:
    return on_fork(p, l, false);
  case PTRACE_EVENT_VFORK:
    return on_fork(p, l, true);
  case PTRACE_EVENT_EXEC:
    return on_exec(p, l);
  case PTRACE_EVENT_VFORK_DONE:
    if (report_vfork_) {
      StopEvent ev;
      ev.kind = StopKind::VForkDone;
      ev.thread = {p.pid, l.tid};
      return ev;
    }
    if (p.vfork_breakpoints_lifted) {
      restore_all_int3(p);
      p.vfork_breakpoints_lifted = false;
    }
    resume_lwp(p, l);
    return std::nullopt;
  default:
    resume_lwp(p, l);
    return std::nullopt;
  }
}

int LinuxTarget::wait_new_child(Tid tid) {
  auto it = unknown_stops_.find(tid);
  if (it != unknown_stops_.end()) {
    int st = it->second;
    unknown_stops_.erase(it);
    return st;
  }
  int st = 0;
  while (waitpid(tid, &st, __WALL) < 0 && errno == EINTR) {
  }
  return st;
}

std::optional<StopEvent> LinuxTarget::on_new_thread(Process& p, Lwp& parent) {
  unsigned long msg = 0;
  ptrace(PTRACE_GETEVENTMSG, parent.tid, nullptr, &msg);
  Tid tid = static_cast<Tid>(msg);
  int st = wait_new_child(tid);
  Lwp& n = p.lwps[tid];
  n.tid = tid;
  n.resumed = true;
  n.kind = ResumeKind::Continue;
  if (p.debug_regs.any_used())
    n.debug_regs_dirty = true; // the kernel gives new threads clean debug registers
  if (!is_plain_sigstop(st))
    store_status(p, n, st);

  std::optional<StopEvent> ev;
  if (report_thread_events_) {
    ev.emplace();
    ev->kind = StopKind::ThreadCreated;
    ev->thread = {p.pid, tid};
  } else {
    resume_lwp(p, n);
  }
  resume_lwp(p, parent);
  return ev;
}

std::optional<StopEvent> LinuxTarget::on_fork(Process& p, Lwp& parent, bool vfork) {
  unsigned long msg = 0;
  ptrace(PTRACE_GETEVENTMSG, parent.tid, nullptr, &msg);
  Pid child = static_cast<Pid>(msg);
  int st = wait_new_child(child);
  Process& c = add_process(child, p.attached);
  Lwp& cl = c.lwps[child];
  cl.tid = child;
  if (!is_plain_sigstop(st) && !WIFSTOPPED(st))
    store_status(c, cl, st);
  // The child's memory holds the parent's int3s: track them so gdb can remove them.
  c.breakpoints = p.breakpoints;
  for (auto& [addr, bp] : c.breakpoints)
    bp.trace = nullptr; // trace callbacks belong to the parent's collector
  c.debug_regs = p.debug_regs;
  cl.debug_regs_dirty = c.debug_regs.any_used();
  publish_crash_table();

  if (vfork ? report_vfork_ : report_fork_) {
    c.unreported_fork_of = p.pid; // until gdb is told (take_report)
    StopEvent ev;
    ev.kind = vfork ? StopKind::VForked : StopKind::Forked;
    ev.thread = {p.pid, parent.tid};
    ev.child = {child, child};
    return ev;
  }
  // Not reported: detach the child, without our breakpoints, as gdbserver does.
  if (vfork) { // shared memory until exec/exit: lift until vfork-done
    lift_all_int3(p);
    p.vfork_breakpoints_lifted = true;
  } else {
    lift_all_int3(c);
  }
  ptrace(PTRACE_DETACH, child, nullptr, nullptr);
  remove_process(child);
  resume_lwp(p, parent);
  return std::nullopt;
}

std::optional<StopEvent> LinuxTarget::on_exec(Process& p, Lwp& l) {
  Pid pid = p.pid;
  // The other threads are gone; the exec'ing thread now has the leader's id.
  Lwp keep = l;
  keep.tid = pid;
  keep.at_breakpoint = false;
  keep.debug_regs_dirty = false;
  keep.raw.reset();
  p.lwps.clear();
  p.lwps[pid] = keep;
  p.breakpoints.clear(); // the old image (and its int3s) is gone
  p.removed_breakpoints.clear();
  p.debug_regs = DebugRegisters{};
  p.vfork_breakpoints_lifted = false;
  p.thread_db.reset(); // bound to the old image's libc
  p.memory.open(pid);
  publish_crash_table();
  if (!report_exec_)
    return signal_event(pid, pid, SIGTRAP);
  StopEvent ev;
  ev.kind = StopKind::Execd;
  ev.thread = {pid, pid};
  ev.signal = SIGTRAP;
  if (auto path = procfs::exe_path(pid))
    ev.exec_path = *path;
  return ev;
}

std::optional<StopEvent> LinuxTarget::on_syscall_stop(Process& p, Lwp& l) {
  __ptrace_syscall_info info{};
  long n = ptrace(PTRACE_GET_SYSCALL_INFO, l.tid, (void*)sizeof info, &info);
  bool entry;
  int nr;
  if (n > 0 && info.op == PTRACE_SYSCALL_INFO_ENTRY) {
    entry = true;
    nr = static_cast<int>(info.entry.nr);
    l.syscall_nr = nr;
  } else if (n > 0 && info.op == PTRACE_SYSCALL_INFO_EXIT) {
    entry = false;
    nr = l.syscall_nr;
  } else {
    resume_lwp(p, l);
    return std::nullopt;
  }
  bool wanted =
      p.catch_syscalls && (p.syscalls.empty() ||
                           std::find(p.syscalls.begin(), p.syscalls.end(), nr) != p.syscalls.end());
  if (!wanted) {
    resume_lwp(p, l);
    return std::nullopt;
  }
  StopEvent ev = signal_event(p.pid, l.tid, SIGTRAP);
  ev.kind = entry ? StopKind::SyscallEntry : StopKind::SyscallReturn;
  ev.syscall_number = nr;
  return ev;
}

std::optional<StopEvent> LinuxTarget::on_trap(Process& p, Lwp& l) {
  Pid pid = p.pid;
  Tid tid = l.tid;
  switch (l.trap) {
  case TrapKind::SwBreak: {
    uint64_t addr = l.trap_address;
    auto it = p.breakpoints.find(addr);
    if (it == p.breakpoints.end()) {
      // Removed since the hit (pc already rewound): just run the original instruction.
      resume_lwp(p, l);
      return std::nullopt;
    }
    l.at_breakpoint = true;
    l.breakpoint_pc = addr;
    if (it->second.trace) {
      std::optional<user_regs_struct> regs_after;
      TraceOutcome outcome = run_trace_hit(pid, tid, addr, &regs_after);
      Process* pp = nullptr;
      Lwp* ll = find_lwp(tid, &pp);
      if (outcome == TraceOutcome::Gone || !ll)
        return std::nullopt;
      if (outcome == TraceOutcome::Report)
        return signal_event(pid, tid, SIGTRAP, StopReason::SwBreak);
      if (outcome == TraceOutcome::Continue)
        resume_lwp(*pp, *ll, regs_after ? &*regs_after : nullptr);
      return std::nullopt; // EventPending: the next status is interpreted by dispatch
    }
    if (it->second.user)
      return signal_event(pid, tid, SIGTRAP, StopReason::SwBreak);
    resume_lwp(p, l); // an int3 nobody wants any more (inherited by a fork child)
    return std::nullopt;
  }
  case TrapKind::HwBreak:
    return signal_event(pid, tid, SIGTRAP, StopReason::HwBreak);
  case TrapKind::Watch:
  case TrapKind::AccessWatch: {
    auto ev = signal_event(pid, tid, SIGTRAP,
                           l.trap == TrapKind::Watch ? StopReason::Watch : StopReason::AWatch);
    ev.watch_address = l.trap_address;
    return ev;
  }
  case TrapKind::Step:
    if (!is_stepping(l)) {
      // The end of a step gdb abandoned, collected while the thread was held
      // stopped; gdb now continues it (see drop_stale_report).
      resume_lwp(p, l);
      return std::nullopt;
    }
    if (l.kind == ResumeKind::RangeStep) {
      auto pc = x86::read_pc(tid);
      if (pc && *pc >= l.range_start && *pc < l.range_end) {
        resume_lwp(p, l);
        return std::nullopt;
      }
    }
    return signal_event(pid, tid, SIGTRAP, StopReason::SingleStep);
  default:
    return signal_event(pid, tid, SIGTRAP);
  }
}

// Runs the collector's callback for a trace-breakpoint hit of thread TID
// (stopped, pc == ADDRESS) and its while-stepping steps. Other threads keep
// running except during the instant an int3 is lifted for a step.
LinuxTarget::TraceOutcome LinuxTarget::run_trace_hit(Pid pid, Tid tid, uint64_t address,
                                                     std::optional<user_regs_struct>* known) {
  Process* p = nullptr;
  Lwp* l = find_lwp(tid, &p);
  auto it = p->breakpoints.find(address);
  TraceHitCallback callback = it->second.trace; // a copy: the callback may remove itself
  ThreadId id{pid, tid};
  user_regs_struct raw{};
  auto regs = x86::read_registers(tid, avx_, &raw);
  if (!regs)
    return TraceOutcome::Continue;
  bool more = callback(id, address, 0, *regs);
  if (!(l = find_lwp(tid, &p)))
    return TraceOutcome::Gone;
  it = p->breakpoints.find(address);
  if (it != p->breakpoints.end() && it->second.user)
    return TraceOutcome::Report; // gdb's own breakpoint at the same place
  for (int step = 1; more; step++) {
    // The registers just read for the callback (which only reads) are the thread's.
    bool stepped;
    if (int3_inserted(*p, raw.rip)) {
      l->breakpoint_pc = raw.rip;
      stepped = step_over_breakpoint(*p, *l, 0, &raw);
    } else {
      stepped = single_step_sync(*p, *l, 0);
    }
    if (!(l = find_lwp(tid, &p)))
      return TraceOutcome::Gone;
    if (!stepped)
      return TraceOutcome::EventPending;
    l->at_breakpoint = false;
    regs = x86::read_registers(tid, avx_, &raw);
    if (!regs)
      return TraceOutcome::Continue;
    more = callback(id, address, step, *regs);
    if (!(l = find_lwp(tid, &p)))
      return TraceOutcome::Gone;
  }
  *known = raw;
  return TraceOutcome::Continue;
}

// --- resuming and stopping ---

void LinuxTarget::resume_lwp(Process& p, Lwp& l, const user_regs_struct* known) {
  if (l.raw || l.report || l.running)
    return;
  if (l.debug_regs_dirty) {
    (void)apply_debug_registers(l.tid, p.debug_regs);
    l.debug_regs_dirty = false;
  }
  int sig = l.pending_signal;
  l.pending_signal = 0;
  if (l.at_breakpoint) {
    l.at_breakpoint = false;
    std::optional<uint64_t> pc;
    if (known)
      pc = known->rip;
    else if (auto read = x86::read_pc(l.tid))
      pc = *read;
    // Still where it hit our int3 (gdb did not move it): execute the original instruction.
    if (pc && *pc == l.breakpoint_pc && int3_inserted(p, *pc)) {
      if (!step_over_breakpoint(p, l, sig, known))
        return; // something else happened during the step; it is pending on l
      sig = 0;
      if (is_stepping(l)) {
        auto now = x86::read_pc(l.tid);
        bool leave =
            l.kind == ResumeKind::Step || !now || *now < l.range_start || *now >= l.range_end;
        if (leave) { // that step was the whole request: report it
          l.raw = stop_status(SIGTRAP);
          l.trap = TrapKind::Step;
          post_dispatch();
          return;
        }
      }
    }
  }
  int request = is_stepping(l)     ? PTRACE_SINGLESTEP
                : p.catch_syscalls ? PTRACE_SYSCALL
                                   : PTRACE_CONT;
  ptrace(static_cast<__ptrace_request>(request), l.tid, nullptr, (void*)(long)sig);
  // Even on ESRCH: a vanished thread reports its exit through waitpid.
  l.running = true;
  ++run_epoch_;
  l.single_stepped = request == PTRACE_SINGLESTEP;
}

// Executes the instruction under the int3 at l.breakpoint_pc for thread L.
// Returns true once it executed (a signal, when given, delivered), false when
// another event came first (pending on L).
bool LinuxTarget::step_over_breakpoint(Process& p, Lwp& l, int signal,
                                       const user_regs_struct* known) {
  if (signal == 0 && step_over_in_place(p, l, known)) {
    ++step_over_stats_.in_place;
    return true;
  }
  ++step_over_stats_.all_threads_stopped;
  uint64_t addr = l.breakpoint_pc;
  // No other thread of the process may run past the lifted int3.
  std::vector<Tid> stopped = stop_threads(p, &l);
  auto it = p.breakpoints.find(addr);
  if (it != p.breakpoints.end())
    (void)p.memory.write(addr, std::span<const uint8_t>(&it->second.original, 1));
  bool stepped = single_step_sync(p, l, signal);
  bool exec_happened = l.raw && (*l.raw >> 16) == PTRACE_EVENT_EXEC;
  if (!exec_happened && int3_inserted(p, addr)) {
    uint8_t int3 = 0xcc;
    (void)p.memory.write(addr, std::span<const uint8_t>(&int3, 1));
  }
  restart_threads(p.pid, stopped);
  // A signal stop came before the step (SIGCHLD of an exiting fork child, say): the thread is still
  // at the int3 whose hit was already handled, so its next resume steps over again instead of
  // running into the int3 and counting the hit twice.
  if (!stepped) {
    auto pc = x86::read_pc(l.tid);
    l.at_breakpoint = pc && *pc == addr;
  }
  return stepped;
}

// The instruction emulated on L's registers, the int3 left in place, so no
// other thread has to stop (step_in_place.h). Not with a hardware watchpoint
// or breakpoint armed (an emulated access would not trigger it) nor when the
// program set TF itself (the CPU's trap after the instruction is its own).
bool LinuxTarget::step_over_in_place(Process& p, Lwp& l, const user_regs_struct* known) {
  uint64_t addr = l.breakpoint_pc;
  auto bp = p.breakpoints.find(addr);
  if (p.debug_regs.any_used() || bp == p.breakpoints.end())
    return false;
  SwBreakpoint& at = bp->second;
  if (at.insn_len == 0) {
    auto got = p.memory.read(addr, at.insn);
    if (!got || *got == 0)
      return false;
    for (auto it = bp; it != p.breakpoints.end() && it->first < addr + *got; ++it)
      at.insn[it->first - addr] = it->second.original;
    at.insn_len = uint8_t(*got);
  }
  user_regs_struct regs{};
  if (known)
    regs = *known;
  else if (ptrace(PTRACE_GETREGS, l.tid, nullptr, &regs) != 0)
    return false;
  if (regs.rip != addr || (regs.eflags & kEflagsTrap))
    return false;
  if (execute_in_place(std::span<const uint8_t>(at.insn.data(), at.insn_len), regs, p.pid) !=
      InPlace::Done)
    return false;
  // (Fails only for a thread that vanished: its exit comes through waitpid.)
  (void)ptrace(PTRACE_SETREGS, l.tid, nullptr, &regs);
  return true;
}

bool LinuxTarget::single_step_sync(Process& p, Lwp& l, int signal) {
  for (;;) {
    l.single_stepped = true;
    if (ptrace(PTRACE_SINGLESTEP, l.tid, nullptr, (void*)(long)signal) != 0) {
      l.running = true; // gone: its exit arrives through waitpid
      ++run_epoch_;
      return false;
    }
    signal = 0;
    int st = 0;
    pid_t w;
    while ((w = waitpid(l.tid, &st, __WALL)) < 0 && errno == EINTR) {
    }
    if (w != l.tid) {
      l.running = true;
      ++run_epoch_;
      return false;
    }
    if (is_plain_sigstop(st) && l.stop_expected) {
      l.stop_expected = false; // our earlier SIGSTOP arrived first; step again
      continue;
    }
    store_status(p, l, st);
    if (l.trap == TrapKind::Step) {
      l.raw.reset();
      l.trap = TrapKind::None;
      return true;
    }
    post_dispatch();
    return false;
  }
}

// Non-stop vCont;t / vCtrlC: every thread gdb considers running reports a
// stop (signal 0), also one the stub holds stopped for the moment (during
// another thread's step over a breakpoint) or whose event is not interpreted
// yet (which may turn out to be internal and resume it).
void LinuxTarget::stop_for_gdb(Process& p, Lwp& l) {
  if (!l.resumed || l.zombie)
    return;
  if (l.report) { // that report answers; marked, as it may be one gdb never sees
    l.report_stop_zero = true;
    return;
  }
  if (l.running || l.raw) {
    request_stop(p, l);
    l.report_stop_zero = true;
  } else {
    l.report = signal_event(p.pid, l.tid, 0);
  }
}

void LinuxTarget::request_stop(Process& p, Lwp& l) {
  if (!l.stop_expected) {
    syscall(SYS_tgkill, p.pid, l.tid, SIGSTOP);
    l.stop_expected = true;
  }
}

void LinuxTarget::wait_for_stop(Process& p, Lwp& l) {
  while (l.running) {
    // A zombie leader of a live thread group never reports until the group ends.
    if (l.tid == p.pid && p.lwps.size() > 1 && procfs::thread_state(p.pid, l.tid) == 'Z') {
      l.running = false;
      l.zombie = true;
      return;
    }
    int st = 0;
    pid_t w = waitpid(l.tid, &st, __WALL);
    if (w < 0 && errno == EINTR)
      continue;
    if (w != l.tid) {
      l.running = false;
      return;
    }
    if (is_plain_sigstop(st) && l.stop_expected) {
      l.stop_expected = false;
      l.running = false;
      return;
    }
    store_status(p, l, st); // another event came first; our SIGSTOP stays expected
  }
}

std::vector<Tid> LinuxTarget::stop_threads(Process& p, const Lwp* except) {
  std::vector<Tid> stopped;
  for (auto& [tid, l] : p.lwps) {
    if (&l != except && l.running) {
      request_stop(p, l);
      stopped.push_back(tid);
    }
  }
  for (Tid tid : stopped) {
    auto it = p.lwps.find(tid);
    if (it != p.lwps.end())
      wait_for_stop(p, it->second);
  }
  return stopped;
}

void LinuxTarget::stop_all_processes() {
  for (auto& [pid, p] : procs_)
    for (auto& [tid, l] : p->lwps)
      if (l.running)
        request_stop(*p, l);
  for (auto& [pid, p] : procs_)
    for (auto& [tid, l] : p->lwps)
      if (l.running)
        wait_for_stop(*p, l);
}

void LinuxTarget::restart_threads(Pid pid, const std::vector<Tid>& tids) {
  Process* p = find_process(pid);
  if (!p)
    return;
  bool pending = false;
  for (Tid tid : tids) {
    auto it = p->lwps.find(tid);
    if (it == p->lwps.end())
      continue;
    Lwp& l = it->second;
    if (l.raw || l.report)
      pending = true;
    else
      resume_lwp(*p, l);
  }
  if (pending)
    post_dispatch();
}

// --- requests from the protocol layer ---

// A report held back while another thread's event went to gdb can be stale by
// the time gdb resumes its thread (gdbserver re-checks pending statuses too):
// - the end of a step gdb abandoned (it switched to the other thread's event
//   and now continues this one): gdb would see a SIGTRAP it never asked for;
// - a breakpoint hit whose int3 gdb removed meanwhile, or after gdb moved pc;
// - any stop of a thread that has ended since (SIGKILL from outside).
// The thread then simply runs on (a breakpoint hit's pc is already rewound).
void LinuxTarget::drop_stale_report(Process& p, Lwp& l) {
  if (!l.report || l.report->kind != StopKind::Signalled)
    return;
  bool stale = false;
  if (l.raw && !WIFSTOPPED(*l.raw)) {
    // The thread ended since (the process was killed from outside): its exit
    // is what gdb must hear, not a stop whose registers are gone.
    stale = true;
  } else if (l.report->signal != SIGTRAP) {
    return;
  } else if (l.report->reason == StopReason::SingleStep) {
    stale = !is_stepping(l);
  } else if (l.report->reason == StopReason::SwBreak) {
    auto pc = x86::read_pc(l.tid);
    stale = pc && !int3_inserted(p, *pc);
  }
  if (stale) {
    if (debug_enabled())
      std::fprintf(stderr, "[target] %d/%d: stale report (reason %d) dropped\n", p.pid, l.tid,
                   (int)l.report->reason);
    l.report.reset();
  }
}

Result<void> LinuxTarget::resume(const std::vector<ResumeAction>& actions) {
  auto matching = [&](Pid pid, Tid tid) -> const ResumeAction* {
    for (const auto& a : actions)
      if (a.thread.pid == -1 ||
          (a.thread.pid == pid && (a.thread.tid == -1 || a.thread.tid == tid)))
        return &a;
    return nullptr;
  };
  std::vector<ThreadId> to_run;
  for (auto& [pid, p] : procs_) {
    if (hidden(*p))
      continue; // a wildcard must not run a fork child gdb does not know yet
    for (auto& [tid, l] : p->lwps) {
      const ResumeAction* a = matching(pid, tid);
      if (!a || a->kind == ResumeKind::Leave)
        continue;
      if (a->kind == ResumeKind::Stop) {
        if (non_stop_)
          stop_for_gdb(*p, l);
        continue;
      }
      // Non-stop: an action applies to stopped threads only. A thread gdb
      // still has running (stepping, say, its step's end not reported yet)
      // keeps its own request: a wildcard 'c' for the others must not turn
      // its step into a continue.
      if (non_stop_ && l.resumed)
        continue;
      l.resumed = true;
      l.kind = a->kind;
      l.attach_signal = 0; // gdb chose: a->signal passes it or not
      if (a->signal)
        l.pending_signal = a->signal;
      l.range_start = a->range_start;
      l.range_end = a->range_end;
      drop_stale_report(*p, l);
      to_run.push_back({pid, tid});
    }
  }
  waiting_ = true;
  if (!non_stop_)
    reported_ = false;
  // An interrupt not answered yet: report it now instead of running anything.
  if (to_run.empty() || (!non_stop_ && interrupt_due())) {
    // (reports of vanished threads/processes may still be queued)
    post_dispatch();
    return ok();
  }
  if (!non_stop_) {
    // Events already collected are reported before anything runs again.
    interpret_pending();
    bool pending = !orphan_reports_.empty();
    for (const auto& id : to_run)
      if (Lwp* l = find_lwp(id.tid); l && l->report)
        pending = true;
    if (pending) {
      post_dispatch();
      return ok();
    }
  }
  for (const auto& id : to_run) {
    Process* p = nullptr;
    Lwp* l = find_lwp(id.tid, &p);
    if (l && l->resumed && !l->running)
      resume_lwp(*p, *l);
  }
  post_dispatch();
  return ok();
}

Result<void> LinuxTarget::interrupt(Pid pid) {
  if (procs_.empty())
    return make_error(ESRCH, "no process to interrupt");
  if (non_stop_) {
    for (auto& [ppid, p] : procs_)
      if ((pid == -1 || ppid == pid) && !hidden(*p))
        for (auto& [tid, l] : p->lwps)
          stop_for_gdb(*p, l);
    post_dispatch();
    return ok();
  }
  // All-stop ^C: freeze everything and report SIGINT for a resumed thread (no
  // signal is queued in the program, so a program blocking SIGINT can still be
  // interrupted). dispatch() does it, after any event already collected.
  if (pid != -1 && !find_process(pid))
    return make_error(ESRCH, "no such process " + std::to_string(pid));
  interrupt_requested_ = true; // when everything is stopped: for the next resume
  if (!reported_)
    post_dispatch();
  return ok();
}

bool LinuxTarget::pause_all() {
  if (non_stop_)
    return false;
  bool was_running = false;
  for (const auto& [pid, p] : procs_)
    for (const auto& [tid, l] : p->lwps)
      was_running |= l.running || l.resumed;
  stop_all_processes();
  for (auto& [pid, p] : procs_)
    for (auto& [tid, l] : p->lwps)
      l.resumed = false; // their collected statuses wait for the next resume
  reported_ = true;
  waiting_ = false;
  interrupt_requested_ = false;
  return was_running;
}

} // namespace gdbtrace
