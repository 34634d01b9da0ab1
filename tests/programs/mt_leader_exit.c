/* The leader exits before the other threads: main calls pthread_exit() and stays a zombie while
 * the workers run on; the last worker ends the process with exit(7), so its exit status is 7.
 * Usage: mt_leader_exit */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#define WORKERS 2

static pthread_barrier_t done;

void worker_marker(int index) { __asm__ volatile("" ::"r"(index) : "memory"); }

static void *worker(void *arg) {
  int index = (int)(long)arg;
  usleep(200 * 1000); /* the leader is gone by now */
  worker_marker(index);
  if (pthread_barrier_wait(&done) == PTHREAD_BARRIER_SERIAL_THREAD) {
    sleep(1); /* time to interrupt the process while its leader is a zombie */
    exit(7);
  }
  pause(); /* the other worker: exit() ends it */
  return NULL;
}

int main(void) {
  pthread_barrier_init(&done, NULL, WORKERS);
  for (long i = 0; i < WORKERS; i++) {
    pthread_t t;
    pthread_create(&t, NULL, worker, (void *)i);
  }
  pthread_exit(NULL);
}
