/* Tracee for tests/integration/test_debug_uprobe_clash.py: sleeps, then calls late_target() a few
 * times, so a test can take a breakpoint out from under the stub (another program's uprobe on the
 * same instruction, added and removed) before the first call.
 * Usage: late_call [milliseconds before the first call (default 1500)] */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((noinline)) int late_target(int a) {
  int b = a * 2;
  b += 3;
  return b;
}

int main(int argc, char** argv) {
  int ms = argc > 1 ? atoi(argv[1]) : 1500;
  usleep(ms * 1000);
  int total = 0;
  for (int i = 0; i < 3; i++)
    total += late_target(i);
  printf("late_call done: %d\n", total);
  return 0;
}
