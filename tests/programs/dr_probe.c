// Test oracle, independent of the stub's own check: does this machine deliver
// x86 debug-register traps? Some hypervisors accept DR0-DR7 writes and never
// raise #DB. A traced child runs into a DR0 execute breakpoint; prints
// "delivered" or "not delivered" (exit 0), or exits 2 when it cannot tell.
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) void target_fn(void) {
  __asm__ volatile("" ::: "memory");
}

int main(void) {
  pid_t child = fork();
  if (child == 0) {
    ptrace(PTRACE_TRACEME, 0, 0, 0);
    raise(SIGSTOP);
    target_fn();
    _exit(0);
  }
  int st;
  if (child < 0 || waitpid(child, &st, 0) != child || !WIFSTOPPED(st))
    return 2;
  long dr0 = offsetof(struct user, u_debugreg[0]), dr7 = offsetof(struct user, u_debugreg[7]);
  if (ptrace(PTRACE_POKEUSER, child, (void*)dr0, (void*)&target_fn) != 0 ||
      ptrace(PTRACE_POKEUSER, child, (void*)dr7, (void*)1L) != 0 || // L0, execute, 1 byte
      ptrace(PTRACE_CONT, child, 0, 0) != 0 || waitpid(child, &st, 0) != child)
    return 2;
  int trapped = WIFSTOPPED(st) && WSTOPSIG(st) == SIGTRAP;
  kill(child, SIGKILL);
  waitpid(child, &st, 0);
  puts(trapped ? "delivered" : "not delivered");
  return 0;
}
