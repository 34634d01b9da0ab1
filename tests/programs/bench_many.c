/* Bench tracee for thousands of tracepoints (bench/tracepoints.sh): 10 000 small functions
 * many_0000 .. many_9999, each starting with a `nop` (emulated by the kernel at a uprobe), called
 * round robin in a loop.
 * Usage: bench_many <calls> [span]   calls many_<i % span> for i < calls (span 1..10000, default
 * 10000) and prints `calls=<n> span=<s> ns_per_iter=<x>` measured inside the tracee. With one
 * tracepoint on each of the first <span> functions every call is one hit, so the per-hit cost of
 * T tracepoints is (traced - untraced) ns/iter at span T. A debugger stops at bench_ready() to
 * place its tracepoints. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

volatile long sink;

#define MANY_FN(n)                                                                                 \
  __attribute__((noinline)) void many_##n(long a) {                                                \
    asm volatile("nop");                                                                           \
    sink += a;                                                                                     \
  }
#define MANY_10(p)                                                                                 \
  MANY_FN(p##0)                                                                                    \
  MANY_FN(p##1) MANY_FN(p##2) MANY_FN(p##3) MANY_FN(p##4) MANY_FN(p##5) MANY_FN(p##6)              \
      MANY_FN(p##7) MANY_FN(p##8) MANY_FN(p##9)
#define MANY_100(p)                                                                                \
  MANY_10(p##0)                                                                                    \
  MANY_10(p##1) MANY_10(p##2) MANY_10(p##3) MANY_10(p##4) MANY_10(p##5) MANY_10(p##6)              \
      MANY_10(p##7) MANY_10(p##8) MANY_10(p##9)
#define MANY_1000(p)                                                                               \
  MANY_100(p##0)                                                                                   \
  MANY_100(p##1) MANY_100(p##2) MANY_100(p##3) MANY_100(p##4) MANY_100(p##5) MANY_100(p##6)        \
      MANY_100(p##7) MANY_100(p##8) MANY_100(p##9)
MANY_1000(0)
MANY_1000(1) MANY_1000(2) MANY_1000(3) MANY_1000(4) MANY_1000(5) MANY_1000(6) MANY_1000(7)
    MANY_1000(8) MANY_1000(9)

#define REF(n) many_##n,
#define REF_10(p)                                                                                  \
  REF(p##0)                                                                                        \
  REF(p##1) REF(p##2) REF(p##3) REF(p##4) REF(p##5) REF(p##6) REF(p##7) REF(p##8) REF(p##9)
#define REF_100(p)                                                                                 \
  REF_10(p##0)                                                                                     \
  REF_10(p##1) REF_10(p##2) REF_10(p##3) REF_10(p##4) REF_10(p##5) REF_10(p##6) REF_10(p##7)       \
      REF_10(p##8) REF_10(p##9)
#define REF_1000(p)                                                                                \
  REF_100(p##0)                                                                                    \
  REF_100(p##1) REF_100(p##2) REF_100(p##3) REF_100(p##4) REF_100(p##5) REF_100(p##6)              \
      REF_100(p##7) REF_100(p##8) REF_100(p##9)

        typedef void (*many_fn)(long);
static many_fn const functions[] = {REF_1000(0) REF_1000(1) REF_1000(2) REF_1000(3) REF_1000(
    4) REF_1000(5) REF_1000(6) REF_1000(7) REF_1000(8) REF_1000(9)};
#define NFUNCTIONS (long)(sizeof functions / sizeof functions[0])

__attribute__((noinline)) void bench_ready(void) {
  asm volatile("" ::: "memory");
}

int main(int argc, char** argv) {
  long calls = argc > 1 ? atol(argv[1]) : 100000;
  long span = argc > 2 ? atol(argv[2]) : NFUNCTIONS;
  if (calls <= 0 || span <= 0 || span > NFUNCTIONS) {
    fprintf(stderr, "usage: bench_many <calls> [span 1..%ld]\n", NFUNCTIONS);
    return 2;
  }
  bench_ready();
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long i = 0, k = 0; i < calls; i++) {
    functions[k](i);
    if (++k == span)
      k = 0;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double ns = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / calls;
  printf("calls=%ld span=%ld ns_per_iter=%.1f\n", calls, span, ns);
  return 0;
}
