/* Bench tracee for long runs (bench/circular.sh): <threads> threads each call c_site(tid, i) for
 * i = 0, 1, 2, ... until <seconds> have passed, then main prints each thread's number of calls and
 * calls c_done(). A frame's rdi and rsi say which thread made it and at which call, so a saved
 * trace can be checked for holes and duplicates, and that each thread's last frame is its last call
 * (calls - 1). c_site starts with `nop` (emulated at a uprobe), as bench_threads.c's t_site.
 * Usage: bench_timed_counter <threads> <seconds>. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

volatile long sink;
static double seconds;
static long calls[64];

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

__attribute__((noinline)) void c_site(long tid, long i) {
  asm volatile("nop; mov sink(%%rip), %%rax" ::"D"(tid), "S"(i) : "rax", "memory");
}

/* gdb breaks here once every thread has finished: calls[] holds the counts. */
__attribute__((noinline)) void c_done(int threads) {
  asm volatile("" ::"r"(threads) : "memory");
}

static void* worker(void* arg) {
  long tid = (long)arg;
  double end = now_s() + seconds;
  long i = 0;
  for (;;) {
    c_site(tid, i++);
    if ((i & 0xffff) == 0 && now_s() >= end) // the clock only every 65536 calls
      break;
  }
  calls[tid - 1] = i;
  return NULL;
}

int main(int argc, char** argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 1;
  seconds = argc > 2 ? atof(argv[2]) : 1;
  pthread_t t[64];
  if (threads < 1 || threads > 64)
    return 2;
  for (long k = 0; k < threads; k++)
    pthread_create(&t[k], NULL, worker, (void*)(k + 1));
  for (int k = 0; k < threads; k++)
    pthread_join(t[k], NULL);
  for (int k = 0; k < threads; k++)
    printf("thread=%d calls=%ld\n", k + 1, calls[k]);
  fflush(stdout);
  c_done(threads);
  return 0;
}
