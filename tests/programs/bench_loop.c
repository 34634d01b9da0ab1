/* Bench tracee (the anchors' probe_loop): calls probe_me(i, 3*i) n times, prints ns per iteration
 * measured inside the tracee. Usage: bench_loop [n (default 1000000)] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

volatile long sink;

__attribute__((noinline)) void probe_me(long i, long j) { sink += i ^ j; }

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000000;
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (long i = 0; i < n; i++) probe_me(i, i * 3);
  clock_gettime(CLOCK_MONOTONIC, &b);
  double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
  printf("n=%ld ns_per_iter=%.1f total_ms=%.1f\n", n, ns / n, ns / 1e6);
  fflush(stdout);
  return 0;
}
