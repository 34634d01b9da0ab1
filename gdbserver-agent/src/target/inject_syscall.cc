// LinuxTarget::inject_syscall: the tracee runs one system call for the stub
// (the jump-pad collector maps its shared memory this way, without LD_PRELOAD).
//
// With every thread of the process in a ptrace-stop, one thread gets a
// `syscall` instruction written over two bytes of code the caller names (the
// tracepoint site, which it is about to patch anyway), its registers set for
// the call, and is single-stepped over it; then the code word and all its
// registers are put back. orig_rax = -1 keeps the kernel from "restarting" a
// system call the thread was stopped in (the saved registers, written back
// afterwards, restart it as they would have).
#include <cerrno>
#include <cstring>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "target/linux_target.h"
#include "target/linux_target_detail.h"

namespace gdbtrace {

using namespace linux_target_detail;

// The step left the thread in a SIGTRAP stop. Were the stub to die before
// resuming it, the kernel would deliver that SIGTRAP and kill the program: put
// the thread back in a SIGSTOP stop, as attach and stop_threads leave threads
// (a stub that dies leaves it group-stopped, and SIGCONT lets it go on). The
// SIGSTOP is taken at the return to user mode, before any instruction runs.
void LinuxTarget::back_to_sigstop(Process& p, Lwp& l) {
  syscall(SYS_tgkill, p.pid, l.tid, SIGSTOP);
  if (ptrace(PTRACE_CONT, l.tid, nullptr, nullptr) != 0)
    return;
  ++run_epoch_;
  int st = 0;
  pid_t w;
  while ((w = waitpid(l.tid, &st, __WALL)) < 0 && errno == EINTR) {
  }
  if (w != l.tid || is_plain_sigstop(st))
    return;
  // Another signal came first: the target keeps it, and absorbs our SIGSTOP later.
  l.stop_expected = true;
  store_status(p, l, st);
}

// A signal that reaches the thread before the system call runs (a late stop,
// a timer) is kept for it, and the injection is tried again: the jump pad's
// setup otherwise fell back to another collector for one such signal (seen
// under ASan, where the stub is slower).
Result<int64_t> LinuxTarget::inject_syscall(Pid pid, uint64_t code_address, long number,
                                            std::span<const uint64_t> args) {
  Result<int64_t> r = inject_syscall_once(pid, code_address, number, args);
  for (int retry = 0; retry < 3 && !r && r.error().code == EAGAIN; ++retry)
    r = inject_syscall_once(pid, code_address, number, args);
  return r;
}

Result<int64_t> LinuxTarget::inject_syscall_once(Pid pid, uint64_t code_address, long number,
                                                 std::span<const uint64_t> args) {
  Process* p = find_process(pid);
  if (!p)
    return make_error(ESRCH, "no process " + std::to_string(pid));
  if (!stopped_epoch(pid))
    return make_error(EBUSY, "a thread of the process is running");
  if (args.size() > 6)
    return make_error(EINVAL, "more than 6 system call arguments");
  Lwp* l = nullptr;
  for (auto& [tid, lwp] : p->lwps)
    if (!lwp.zombie && !lwp.raw && (!l || tid == pid))
      l = &lwp;
  if (!l)
    return make_error(EBUSY, "no thread of the process can run a system call now");

  user_regs_struct saved{};
  if (ptrace(PTRACE_GETREGS, l->tid, nullptr, &saved) != 0)
    return make_error(errno, "PTRACE_GETREGS");
  errno = 0;
  long word = ptrace(PTRACE_PEEKTEXT, l->tid, (void*)code_address, nullptr);
  if (errno != 0)
    return make_error(errno, "cannot read the code at the injection address");
  long patched = word;
  std::memcpy(&patched, "\x0f\x05", 2); // syscall
  if (ptrace(PTRACE_POKETEXT, l->tid, (void*)code_address, (void*)patched) != 0)
    return make_error(errno, "cannot write the injected syscall instruction");

  user_regs_struct regs = saved;
  regs.rip = code_address;
  regs.rax = uint64_t(number);
  regs.orig_rax = ~0ull;
  unsigned long long* const slots[] = {&regs.rdi, &regs.rsi, &regs.rdx,
                                       &regs.r10, &regs.r8,  &regs.r9};
  for (size_t i = 0; i < args.size(); ++i)
    *slots[i] = args[i];
  regs.eflags &= ~kEflagsTrap;

  Result<int64_t> result = make_error(EIO, "the injected system call did not complete");
  if (ptrace(PTRACE_SETREGS, l->tid, nullptr, &regs) == 0 &&
      ptrace(PTRACE_SINGLESTEP, l->tid, nullptr, nullptr) == 0) {
    ++run_epoch_;
    int st = 0;
    pid_t w;
    while ((w = waitpid(l->tid, &st, __WALL)) < 0 && errno == EINTR) {
    }
    if (w == l->tid && WIFSTOPPED(st) && WSTOPSIG(st) == SIGTRAP) {
      user_regs_struct after{};
      if (ptrace(PTRACE_GETREGS, l->tid, nullptr, &after) == 0 && after.rip == code_address + 2)
        result = int64_t(after.rax);
      back_to_sigstop(*p, *l);
    } else if (w == l->tid && WIFSTOPPED(st)) {
      // A signal came first (the syscall did not run): the target keeps it
      // for the thread, as after its own single-steps.
      store_status(*p, *l, st);
      result = make_error(EAGAIN, "a signal arrived for the thread; try again");
    } else if (w == l->tid) {
      store_status(*p, *l, st);
      result = make_error(ESRCH, "the thread exited");
      return result;
    }
  }
  (void)ptrace(PTRACE_POKETEXT, l->tid, (void*)code_address, (void*)word);
  (void)ptrace(PTRACE_SETREGS, l->tid, nullptr, &saved);
  return result;
}

} // namespace gdbtrace
