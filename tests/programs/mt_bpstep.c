/* Several threads hit one breakpoint location over and over: `break hit` (with or without a
 * condition) keeps gdb stepping threads over it, so a `detach` or `interrupt` often arrives while a
 * thread is in the middle of a step-over. The total printed at the end shows that every call ran
 * exactly once, whatever the debugger did.
 * Usage: mt_bpstep [iterations per thread (default 200)] [threads (default 4, max 8)]
 *                  [microseconds between calls (default 1000; 0: a tight loop)] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define MAX_THREADS 8

static int iterations, pause_us = 1000;
volatile long calls[MAX_THREADS];

void hit(int index, int iteration) { calls[index] += iteration >= 0; }

static void *worker(void *arg) {
  int index = (int)(long)arg;
  for (int i = 0; i < iterations; i++) {
    hit(index, i);
    if (pause_us) usleep(pause_us);
  }
  return NULL;
}

int main(int argc, char **argv) {
  iterations = argc > 1 ? atoi(argv[1]) : 200;
  int n = argc > 2 ? atoi(argv[2]) : 4;
  if (n < 1 || n > MAX_THREADS) n = 4;
  if (argc > 3) pause_us = atoi(argv[3]);
  pthread_t threads[MAX_THREADS];
  for (long i = 0; i < n; i++) pthread_create(&threads[i], NULL, worker, (void *)i);
  for (int i = 0; i < n; i++) pthread_join(threads[i], NULL);
  long total = 0;
  for (int i = 0; i < n; i++) total += calls[i];
  printf("mt_bpstep done: %ld calls (expected %ld)\n", total, (long)n * iterations);
  return total == (long)n * iterations ? 0 : 1;
}
