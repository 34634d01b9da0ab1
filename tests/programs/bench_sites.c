/* Bench tracee (the anchors' probe_sites): probe sites whose first instruction is `nop`, a 5-byte nop,
 * or `push %rbp`, which the kernel emulates at a uprobe (no out-of-line single-step).
 * Usage: bench_sites <1|5|0 (push)> <n>; prints ns per iteration measured inside the tracee. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

volatile long sink;

__attribute__((noinline)) void p_nop1(long i) {
  asm volatile("nop");
  sink += i;
}
__attribute__((noinline)) void p_nop5(long i) {
  asm volatile(".byte 0x0f,0x1f,0x44,0x00,0x00");
  sink += i;
}
__attribute__((noinline)) void p_push(long i) {
  asm volatile("push %%rbp; pop %%rbp" ::: "memory");
  sink += i;
}

int main(int argc, char **argv) {
  int which = argc > 1 ? atoi(argv[1]) : 1;
  long n = argc > 2 ? atol(argv[2]) : 1000000;
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (long i = 0; i < n; i++) {
    if (which == 1)
      p_nop1(i);
    else if (which == 5)
      p_nop5(i);
    else
      p_push(i);
  }
  clock_gettime(CLOCK_MONOTONIC, &b);
  double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
  printf("which=%d n=%ld ns_per_iter=%.1f\n", which, n, ns / n);
  fflush(stdout);
  return 0;
}
