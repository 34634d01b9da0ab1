/* Call stacks at tracepoint hits (`monitor gdbtrace stacks on`): built -O2
 * without frame pointers (Debian's default), so only DWARF CFI unwinds it.
 *   main -> path_a -> common -> leaf   A times (default 300)
 *   main -> path_b -> common -> leaf   B times (default 700)
 * then qsort (libc) -> compare_ints: a stack through a shared library, and
 * deep(DEPTH) -> ... -> leaf: a stack deeper than a small snapshot.
 * Usage: bench_stacks [A B [DEPTH]]
 * Prints ns_per_iter=<x>: the two loops' time per call of leaf (bench/stacks.sh).
 * noipa keeps each function whole and named (no clones, no inlining) and the
 * stores after each call keep the calls from becoming tail jumps. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

volatile long sink;

__attribute__((noipa)) void leaf(long i) {
  sink += i;
}

__attribute__((noipa)) void common(long i) {
  leaf(i);
  sink ^= 1;
}

__attribute__((noipa)) void path_a(long i) {
  common(i);
  sink += 2;
}

__attribute__((noipa)) void path_b(long i) {
  common(i);
  sink += 3;
}

__attribute__((noipa)) int compare_ints(const void* a, const void* b) {
  int x = *(const int*)a, y = *(const int*)b;
  return (x > y) - (x < y);
}

/* Each level keeps 256 bytes of stack, so DEPTH levels need DEPTH * ~300 bytes. */
__attribute__((noipa)) void deep(int n) {
  volatile char pad[256];
  pad[0] = (char)n;
  if (n > 0)
    deep(n - 1);
  else
    leaf(-1);
  sink += pad[0];
}

int main(int argc, char** argv) {
  long a = argc > 2 ? atol(argv[1]) : 300;
  long b = argc > 2 ? atol(argv[2]) : 700;
  int depth = argc > 3 ? atoi(argv[3]) : 64;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long i = 0; i < a; i++)
    path_a(i);
  for (long i = 0; i < b; i++)
    path_b(i);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
  int v[8] = {5, 3, 7, 1, 8, 2, 6, 4};
  qsort(v, 8, sizeof v[0], compare_ints);
  deep(depth);
  printf("done %ld ns_per_iter=%.1f\n", (long)sink, a + b > 0 ? ns / (a + b) : 0.0);
  return 0;
}
