// Tracee for the gdb-driven sessions in the guest: gt_loop N calls
// probe_me(i, 3*i) N times, then step_site(41) and store_site(&watched, 1234),
// then scale(i + 0.25) for i = 0..2 (its argument in xmm0; on a CPU with AVX,
// ymm1 holds eight 3.5f, upper half included), then done(). Built -O2 -g -static like the other
// guest programs; probe_me starts with a rip-relative load, step_site+1 is `add $1,%rdi` and
// store_site starts with `mov %rsi,(%rdi)`: all emulated sites.
#include <stdio.h>
#include <stdlib.h>

volatile long sink;
volatile char marker[16] = "hello-gdbtrace";

__attribute__((noinline)) long probe_me(long a, long b) {
  sink += a + b;
  return sink;
}

volatile long watched;

// nop; add $1,%rdi; mov %rdi,%rax; ret -- gdb stops on the nop and stepi's
// onto and over the probed add.
long step_site(long);
// mov %rsi,(%rdi); mov %rsi,%rax; ret -- a hardware watchpoint on *%rdi must fire.
long store_site(volatile long*, long);
__asm__(".text\n"
        ".globl step_site\n.type step_site,@function\nstep_site:\n nop\n add $1,%rdi\n mov "
        "%rdi,%rax\n ret\n"
        ".globl store_site\n.type store_site,@function\nstore_site:\n mov %rsi,(%rdi)\n mov "
        "%rsi,%rax\n ret\n");

volatile double dsink;

__attribute__((noinline)) double scale(double x) {
  return x * 2.5;
}

__attribute__((noinline)) void done(void) {
  __asm__ volatile("" ::: "memory");
}

int main(int argc, char** argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000;
  for (long i = 0; i < n; i++)
    probe_me(i, 3 * i);
  sink += step_site(41);
  sink += store_site(&watched, 1234);
  if (__builtin_cpu_supports("avx")) {
    static const float f = 3.5f;
    __asm__ volatile("vbroadcastss %0, %%ymm1" : : "m"(f) : "xmm1");
  }
  for (long i = 0; i < 3; i++)
    dsink += scale(i + 0.25);
  done();
  printf("sink=%ld\n", sink);
  return 0;
}
