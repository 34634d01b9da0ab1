// Tracee for the gdbtrace plugin tests: loops with values and durations the
// tests know in advance.
//
//   plugin_demo [ITERATIONS [DELAY_US]]   work(i, DELAY_US) for i in 0..ITERATIONS-1;
//                                         each call busy-waits DELAY_US microseconds
//   plugin_demo bench ITERATIONS          tiny_probe(i) as fast as possible (export bench)
//   plugin_demo threads N ITERATIONS DELAY_US
//                                         N threads; thread t calls work(t * 1000 + k, DELAY_US)
//                                         for k in 0..ITERATIONS-1
//
// At the line marked "tp-work", i == the iteration, scaled == i * 3,
// g_sample.id == i and g_sample.value == i * 0.5.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct sample {
  int id;
  double value;
  char tag[8];
};

struct sample g_sample;
long g_total;
volatile uint64_t g_sink;

static long now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000L + ts.tv_nsec / 1000;
}

// Busy-waits (not sleep) so the duration does not depend on the scheduler much.
static void busy_wait_us(long us) {
  long end = now_us() + us;
  while (now_us() < end) {
  }
}

__attribute__((noinline)) int work(int i, long delay_us) {
  int scaled = i * 3;
  g_total += scaled; /* tp-work */
  busy_wait_us(delay_us);
  if (i < 0)
    return -1; /* never taken: a second exit path */
  return scaled;
}

__attribute__((noinline)) void tiny_probe(uint64_t i) {
  g_sink = i; /* tp-bench */
}

struct thread_job {
  int base, iterations;
  long delay_us;
};

static void* thread_main(void* arg) {
  struct thread_job* job = arg;
  for (int k = 0; k < job->iterations; k++)
    work(job->base + k, job->delay_us);
  return NULL;
}

static int run_threads(int n, int iterations, long delay_us) {
  pthread_t tids[16];
  struct thread_job jobs[16];
  if (n < 1 || n > 16)
    return 2;
  for (int t = 0; t < n; t++) {
    jobs[t] = (struct thread_job){t * 1000, iterations, delay_us};
    pthread_create(&tids[t], NULL, thread_main, &jobs[t]);
  }
  for (int t = 0; t < n; t++)
    pthread_join(tids[t], NULL);
  printf("threads done %ld\n", g_total); /* bp-threads-done */
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 4 && strcmp(argv[1], "threads") == 0)
    return run_threads(atoi(argv[2]), atoi(argv[3]), atol(argv[4]));
  if (argc > 2 && strcmp(argv[1], "bench") == 0) {
    uint64_t n = strtoull(argv[2], NULL, 0);
    for (uint64_t i = 0; i < n; i++)
      tiny_probe(i);
    printf("bench done %llu\n", (unsigned long long)n); /* bp-bench-done */
    return 0;
  }
  int iterations = argc > 1 ? atoi(argv[1]) : 100;
  long delay_us = argc > 2 ? atol(argv[2]) : 1000;
  for (int i = 0; i < iterations; i++) {
    g_sample.id = i;
    g_sample.value = i * 0.5;
    snprintf(g_sample.tag, sizeof g_sample.tag, "s%d", i % 100);
    work(i, delay_us);
  }
  printf("done %ld\n", g_total); /* bp-done */
  return 0;
}
