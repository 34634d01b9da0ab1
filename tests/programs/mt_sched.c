/* Scheduler locking: workers spin, each incrementing its own counter, while main calls
 * main_marker(round) once per round. With `set scheduler-locking on`, stepping or continuing main
 * must leave every counter unchanged; with it off they advance.
 * Usage: mt_sched [rounds (default 5)] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define WORKERS 3

volatile unsigned long counters[WORKERS];
static volatile int finished;
static pthread_barrier_t started;
__thread int tls_index = -1; /* each thread's own: main's is 100, a worker's its index */

void main_marker(int round) { __asm__ volatile("" ::"r"(round) : "memory"); }

unsigned long counters_sum(void) {
  unsigned long sum = 0;
  for (int i = 0; i < WORKERS; i++) sum += counters[i];
  return sum;
}

static void *spin(void *arg) {
  int index = (int)(long)arg;
  tls_index = index;
  pthread_barrier_wait(&started);
  while (!finished) counters[index]++;
  return NULL;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 5;
  pthread_t threads[WORKERS];
  tls_index = 100;
  pthread_barrier_init(&started, NULL, WORKERS + 1);
  for (long i = 0; i < WORKERS; i++) pthread_create(&threads[i], NULL, spin, (void *)i);
  pthread_barrier_wait(&started);
  for (int round = 0; round < rounds; round++) {
    main_marker(round);
    usleep(1000);
  }
  finished = 1;
  for (int i = 0; i < WORKERS; i++) pthread_join(threads[i], NULL);
  printf("mt_sched done: %d rounds\n", rounds);
  return 0;
}
