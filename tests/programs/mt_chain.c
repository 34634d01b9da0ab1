/* Thread chains: CHAINS lines of detached threads in which each thread creates the next and exits
 * (as gdb.threads/attach-many-short-lived-threads.c), so at any moment a new thread is being
 * created by one that is about to end; tids are reused within seconds. Every thread calls
 * chain_step(), a place for a breakpoint: a thread an attach left untraced dies of SIGTRAP there.
 * Usage: mt_chain [seconds (default 60)] */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#define CHAINS 4

static pthread_attr_t detached;

void chain_step(long chain) {
  __asm__ volatile("" ::"r"(chain) : "memory");
}

static void* link_fn(void* arg) {
  pthread_t next;
  while (pthread_create(&next, &detached, link_fn, arg) != 0)
    usleep(1000);
  chain_step((long)arg);
  return NULL;
}

int main(int argc, char** argv) {
  int seconds = argc > 1 ? atoi(argv[1]) : 60;
  pthread_attr_init(&detached);
  pthread_attr_setdetachstate(&detached, PTHREAD_CREATE_DETACHED);
  for (long i = 0; i < CHAINS; i++) {
    pthread_t t;
    pthread_create(&t, &detached, link_fn, (void*)i);
  }
  sleep(seconds);
  return 0;
}
