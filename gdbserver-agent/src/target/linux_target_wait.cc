// LinuxTarget: collecting wait statuses (SIGCHLD, zombie leaders, exec
// thread take-over, trap classification) and dispatching what they mean:
// reports in all-stop and non-stop order, ^C stops.
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
#include "target/linux_target_detail.h"
#include "target/proc_files.h"
#include "target/step_in_place.h"
#include "target/x86_registers.h"

namespace gdbtrace {

using namespace linux_target_detail;

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

} // namespace gdbtrace
