/* The jump pad's site: jp_probe's first instruction is a rip-relative load of
 * 7 bytes (built -O2: `mov jp_bias(%rip),%rax`), so an `ftrace *jp_probe` can
 * be a 5-byte jmp. Usage: bench_jumppad [CALLS [THREADS [PAUSE_US]]]
 * CALLS calls from the main thread (its own count is printed), THREADS more
 * threads calling jp_probe until the main loop ends, PAUSE_US a sleep between
 * the main thread's calls (so a test can act mid-run). Every worker checks
 * each result (worker_bad counts wrong ones: an instruction the pad lost or
 * ran twice shows there). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

volatile long jp_bias = 3;

__attribute__((noinline)) long jp_probe(long x) {
  return x + jp_bias;
}

__attribute__((noinline)) void jp_done(void) {
  __asm__ volatile("");
}

static volatile int stop_workers;
static long worker_bad;

static void* worker(void* arg) {
  long calls = 0;
  (void)arg;
  long bad = 0;
  while (!stop_workers) {
    if (jp_probe(calls) != calls + 3)
      bad++;
    calls++;
  }
  __atomic_add_fetch(&worker_bad, bad, __ATOMIC_RELAXED);
  return (void*)calls;
}

int main(int argc, char** argv) {
  long n = argc > 1 ? atol(argv[1]) : 10;
  int threads = argc > 2 ? atoi(argv[2]) : 0;
  long pause_us = argc > 3 ? atol(argv[3]) : 0;
  pthread_t tids[16];
  if (threads > 16)
    threads = 16;
  for (int i = 0; i < threads; i++)
    pthread_create(&tids[i], NULL, worker, NULL);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  long sum = 0, calls = 0;
  for (long i = 0; i < n; i++) {
    sum += jp_probe(i);
    calls++;
    if (pause_us)
      usleep(pause_us);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  stop_workers = 1;
  long worker_calls = 0;
  for (int i = 0; i < threads; i++) {
    void* r;
    pthread_join(tids[i], &r);
    worker_calls += (long)r;
  }
  double ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
  printf("BENCH jumppad calls=%ld sum=%ld worker_calls=%ld ns_per_call=%.1f worker_bad=%ld\n",
         calls, sum, worker_calls, n ? ns / n : 0.0, worker_bad);
  fflush(stdout);
  jp_done();
  return 0;
}
