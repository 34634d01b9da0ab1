/* Smallest program: prints its arguments and exits with argc. For run/kill/reconnect tests. */
#include <stdio.h>

int add(int a, int b) { return a + b; }

int main(int argc, char **argv) {
  int sum = add(argc, 40);
  for (int i = 0; i < argc; i++) printf("arg%d=%s\n", i, argv[i]);
  printf("sum=%d\n", sum);
  return argc;
}
