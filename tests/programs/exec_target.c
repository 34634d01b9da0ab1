/* The program exec.c replaces itself with. */
#include <stdio.h>

int exec_target_marker(const char *arg) { return arg != NULL; }

int main(int argc, char **argv) {
  int ok = exec_target_marker(argc > 1 ? argv[1] : NULL);
  printf("exec_target running: %s\n", ok ? argv[1] : "(no arg)");
  return 0;
}
