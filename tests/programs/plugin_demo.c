// Tracee for the gdbtrace plugin tests: loops with values and durations the
// tests know in advance.
//
//   plugin_demo [ITERATIONS [DELAY_US]]   work(i, DELAY_US) for i in 0..ITERATIONS-1;
//                                         each call busy-waits DELAY_US microseconds
//   plugin_demo bench ITERATIONS          tiny_probe(i) as fast as possible (export bench)
//
// At the line marked "tp-work", i == the iteration, scaled == i * 3,
// g_sample.id == i and g_sample.value == i * 0.5.
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

int main(int argc, char** argv) {
  if (argc > 2 && strcmp(argv[1], "bench") == 0) {
    uint64_t n = strtoull(argv[2], NULL, 0);
    for (uint64_t i = 0; i < n; i++)
      tiny_probe(i);
    printf("bench done %llu\n", (unsigned long long)n);
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
  printf("done %ld\n", g_total);
  return 0;
}
