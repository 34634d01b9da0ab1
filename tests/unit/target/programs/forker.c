/* Target unit tests: fork (argv[1] == "fork") or vfork a child that calls
 * child_func() and exits 3; the parent exits 10 + the child's exit code. */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

volatile int child_calls;

void child_func(void) {
  child_calls++;
}

int main(int argc, char** argv) {
  int use_vfork = argc > 1 && strcmp(argv[1], "vfork") == 0;
  pid_t pid = use_vfork ? vfork() : fork();
  if (pid == 0) {
    if (use_vfork)
      _exit(3);
    child_func();
    _exit(3);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  child_func();
  return 10 + (WIFEXITED(st) ? WEXITSTATUS(st) : 50);
}
