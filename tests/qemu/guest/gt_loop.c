// Tracee for the gdb-driven session in the guest: gt_loop N calls
// probe_me(i, 3*i) N times, then done(). Built -O2 -g -static like the other
// guest programs; probe_me starts with a rip-relative load (emulated site).
#include <stdio.h>
#include <stdlib.h>

volatile long sink;
volatile char marker[16] = "hello-gdbtrace";

__attribute__((noinline)) long probe_me(long a, long b) {
  sink += a + b;
  return sink;
}

__attribute__((noinline)) void done(void) {
  __asm__ volatile("" ::: "memory");
}

int main(int argc, char** argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000;
  for (long i = 0; i < n; i++)
    probe_me(i, 3 * i);
  done();
  printf("sink=%ld\n", sink);
  return 0;
}
