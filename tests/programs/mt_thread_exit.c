/* A thread that is being stepped exits: each worker ends with pthread_exit() at the line marked
 * EXIT_LINE; main joins them and calls after_join(). `next` over that line ends the stepped
 * thread while main still runs.
 * Usage: mt_thread_exit */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#define WORKERS 2

static volatile int ready;

void after_join(int workers) { printf("mt_thread_exit: joined %d\n", workers); }

void worker_marker(int index) { __asm__ volatile("" ::"r"(index) : "memory"); }

static void *worker(void *arg) {
  int index = (int)(long)arg;
  while (!ready) usleep(1000);
  usleep(index * 300 * 1000); /* one at a time */
  worker_marker(index);
  pthread_exit(NULL); /* EXIT_LINE */
}

int main(void) {
  pthread_t threads[WORKERS];
  for (long i = 0; i < WORKERS; i++) pthread_create(&threads[i], NULL, worker, (void *)i);
  ready = 1;
  for (int i = 0; i < WORKERS; i++) pthread_join(threads[i], NULL);
  after_join(WORKERS);
  return 0;
}
