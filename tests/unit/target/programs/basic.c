/* Target unit tests: breakpoints, stepping, registers, memory, watchpoints,
 * environment/cwd checks, signals and syscalls. argv[1] selects the mode. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

volatile long counter;
volatile long watched;
volatile int handled;

void break_here(int i) {
  counter += i;
}

static void on_usr1(int sig) {
  handled++;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "loop";
  if (strcmp(mode, "loop") == 0) {
    int n = argc > 2 ? atoi(argv[2]) : 3;
    for (int i = 0; i < n; i++) {
      break_here(i);
      watched = i * 2 + 1;
    }
    return 7;
  }
  if (strcmp(mode, "env") == 0) { /* exit 0 iff $argv[2] == argv[3] ("-" = unset) */
    const char* v = getenv(argv[2]);
    if (strcmp(argv[3], "-") == 0)
      return v == NULL ? 0 : 1;
    return v != NULL && strcmp(v, argv[3]) == 0 ? 0 : 1;
  }
  if (strcmp(mode, "cwd") == 0) { /* exit 0 iff cwd == argv[2] */
    char buf[4096];
    return getcwd(buf, sizeof buf) && strcmp(buf, argv[2]) == 0 ? 0 : 1;
  }
  if (strcmp(mode, "signal") == 0) { /* raise SIGUSR1 three times; exit code = handler runs */
    signal(SIGUSR1, on_usr1);
    for (int i = 0; i < 3; i++)
      raise(SIGUSR1);
    return handled;
  }
  if (strcmp(mode, "syscall") == 0) {
    return getppid() > 0 ? 4 : 5;
  }
  if (strcmp(mode, "args") == 0) { /* exit argc; argv[2] must be "a b" */
    return strcmp(argv[2], "a b") == 0 ? argc : 100;
  }
  if (strcmp(mode, "spin") == 0) { /* run until killed */
    for (;;) {
      counter++;
      usleep(1000);
    }
  }
  return 99;
}
