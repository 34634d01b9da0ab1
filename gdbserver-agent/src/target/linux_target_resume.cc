// LinuxTarget: resuming and stopping threads (steps over breakpoints, in
// place or by single-step; non-stop stop requests) and the protocol layer's
// resume / interrupt requests.
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
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
  std::set<Pid> rearmed;
  for (const auto& id : to_run)
    if (Process* p = find_process(id.pid); p && rearmed.insert(id.pid).second)
      rearm_wiped_int3(*p);
  for (const auto& id : to_run) {
    Process* p = nullptr;
    Lwp* l = find_lwp(id.tid, &p);
    if (l && l->resumed && !l->running)
      resume_lwp(*p, *l);
  }
  check_breakpoints_later();
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
