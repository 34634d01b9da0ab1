/* Target unit tests: NTHREADS threads each call thread_work() ITER times. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define NTHREADS 3
volatile long total;

void thread_work(long i) {
  __atomic_add_fetch(&total, i, __ATOMIC_RELAXED);
}

static void* worker(void* arg) {
  long iters = (long)arg;
  for (long i = 0; i < iters; i++)
    thread_work(i);
  return NULL;
}

int main(int argc, char** argv) {
  long iters = argc > 1 ? atol(argv[1]) : 10;
  pthread_t t[NTHREADS];
  for (int i = 0; i < NTHREADS; i++) {
    pthread_create(&t[i], NULL, worker, (void*)iters);
    char name[16];
    snprintf(name, sizeof name, "worker%d", i);
    pthread_setname_np(t[i], name);
  }
  for (int i = 0; i < NTHREADS; i++)
    pthread_join(t[i], NULL);
  return 0;
}
