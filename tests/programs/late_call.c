/* Tracee for tests/integration/test_debug_uprobe_clash.py: waits until a file appears, then calls
 * late_target() a few times, so a test can take a breakpoint out from under the stub (another
 * program's uprobe on the same instruction, added and removed) before the first call, however
 * slow the machine is.
 * Usage: late_call GO_FILE   (gives up after 60 s) */
#include <stdio.h>
#include <unistd.h>

__attribute__((noinline)) int late_target(int a) {
  int b = a * 2;
  b += 3;
  return b;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: late_call GO_FILE\n");
    return 2;
  }
  for (int waited = 0; access(argv[1], F_OK) != 0; waited++) {
    if (waited == 6000) {
      fprintf(stderr, "late_call: %s never appeared\n", argv[1]);
      return 1;
    }
    usleep(10000);
  }
  int total = 0;
  for (int i = 0; i < 3; i++)
    total += late_target(i);
  printf("late_call done: %d\n", total);
  return 0;
}
