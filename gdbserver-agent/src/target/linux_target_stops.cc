// LinuxTarget: interpreting one collected status: exits, new threads, forks,
// execs, syscall stops and traps, and running trace-breakpoint callbacks.
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

namespace {

bool in_step_through(const Process& p, uint64_t pc) {
  auto it = p.step_through.upper_bound(pc);
  return it != p.step_through.begin() && pc < std::prev(it)->second;
}

} // namespace

void LinuxTarget::add_step_through(Pid pid, uint64_t start, uint64_t end) {
  if (Process* p = find_process(pid))
    p->step_through[start] = end;
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
  if ((sig == SIGSEGV || sig == SIGBUS) && fixed_up_fault(p, l, sig)) {
    resume_lwp(p, l);
    return std::nullopt;
  }
  if (pass_signal(sig) && l.kind == ResumeKind::Continue) {
    l.pending_signal = sig;
    resume_lwp(p, l);
    return std::nullopt;
  }
  return signal_event(p.pid, l.tid, sig);
}

// A fault a collector's code in the tracee expects (set_fault_fixup): the
// thread goes on at the recovery address, the signal is dropped. Only faults
// the kernel raised (si_code > 0): a SIGSEGV sent by kill() while the pc
// happens to be on a listed read is the program's.
bool LinuxTarget::fixed_up_fault(Process& p, Lwp& l, int sig) {
  if (!fault_fixup_)
    return false;
  siginfo_t si{};
  if (ptrace(PTRACE_GETSIGINFO, l.tid, nullptr, &si) != 0 || si.si_signo != sig || si.si_code <= 0)
    return false;
  auto pc = x86::read_pc(l.tid);
  if (!pc)
    return false;
  auto to = fault_fixup_(p.pid, *pc);
  return to && x86::write_pc(l.tid, *to);
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
  p.step_through.clear(); // and the jump pads with it
  p.debug_regs = DebugRegisters{};
  p.vfork_breakpoints_lifted = false;
  p.thread_db.reset(); // bound to the old image's libc
  p.memory.open(pid);
  p.arch = executable_arch(pid); // a 64-bit program may exec a 32-bit one
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
    if (auto pc = x86::read_pc(tid); pc && in_step_through(p, *pc)) {
      resume_lwp(p, l); // inside a jump pad: step on until the site's instruction is done
      return std::nullopt;
    } else if (l.kind == ResumeKind::RangeStep && pc && *pc >= l.range_start && *pc < l.range_end) {
      resume_lwp(p, l);
      return std::nullopt;
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

} // namespace gdbtrace
