/* NTHREADS workers each call thread_marker() once they have all started (barrier), then spin a bit
 * and exit. `break thread_marker` stops with every thread alive.
 * Usage: threads [nthreads (default 4)] [seconds: keep the workers busy this long (default 0)] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MAX_THREADS 16

static pthread_barrier_t started;
static long busy_seconds;
volatile long work[MAX_THREADS];

void thread_marker(int index) { work[index] += index; }

static void *worker(void *arg) {
  int index = (int)(long)arg;
  pthread_barrier_wait(&started);
  thread_marker(index);
  for (long i = 0; i < 1000000; i++) work[index]++;
  time_t end = time(NULL) + busy_seconds;
  while (time(NULL) < end) {
    struct timespec ts = {0, 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 4;
  if (n < 1 || n > MAX_THREADS) n = 4;
  busy_seconds = argc > 2 ? atol(argv[2]) : 0;
  pthread_t threads[MAX_THREADS];
  pthread_barrier_init(&started, NULL, n);
  for (long i = 0; i < n; i++) pthread_create(&threads[i], NULL, worker, (void *)i);
  for (int i = 0; i < n; i++) pthread_join(threads[i], NULL);
  long total = 0;
  for (int i = 0; i < n; i++) total += work[i];
  printf("threads done: %d threads, total %ld\n", n, total);
  return 0;
}
