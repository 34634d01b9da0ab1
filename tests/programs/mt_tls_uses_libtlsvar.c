/* Thread-local variables in the executable (exe_tls) and in a shared library (lib_tls): each
 * worker sets both to a value of its own, then stops in tls_marker() while all of them are alive,
 * so `print exe_tls` must show the selected thread's copy. Without debug info (tls_nodebug is
 * built from this file with -g0) gdb has only the minimal symbols.
 * Usage: mt_tls_uses_libtlsvar */
#include <pthread.h>
#include <stdio.h>

#define WORKERS 2

__thread int exe_tls = 7;
void lib_tls_set(int value);

static pthread_barrier_t ready, done;

void tls_marker(int index) { __asm__ volatile("" ::"r"(index) : "memory"); }

static void *worker(void *arg) {
  int index = (int)(long)arg;
  exe_tls = 100 + index;
  lib_tls_set(600 + index);
  pthread_barrier_wait(&ready);
  tls_marker(index);
  pthread_barrier_wait(&done);
  return NULL;
}

int main(void) {
  pthread_t threads[WORKERS];
  pthread_barrier_init(&ready, NULL, WORKERS);
  pthread_barrier_init(&done, NULL, WORKERS);
  for (long i = 0; i < WORKERS; i++) pthread_create(&threads[i], NULL, worker, (void *)i);
  for (int i = 0; i < WORKERS; i++) pthread_join(threads[i], NULL);
  tls_marker(-1);
  printf("mt_tls done: exe_tls %d\n", exe_tls);
  return 0;
}
