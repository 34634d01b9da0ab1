/* Built with -m32 (the m32_ prefix): an i386 program for the 32-bit tests (test_debug_i386.py).
   Globals and locals of several types, a call chain, a watched global, a second thread with a
   thread-local variable, and, with the argument "fault", a SIGSEGV at a known address ($_siginfo).
   The argument "loop" calls traced_point(i, wide + i) for i < 5, then loop_done (tracepoint tests). */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int counter;
double ratio = 2.5;
long long wide = 0x123456789abcLL;
const char *greeting = "hello i386";
__thread int tls_value = 7;
static pthread_barrier_t ready;

int add(int a, int b) {
  int sum = a + b;
  counter += sum;
  return sum;
}

int traced_point(int i, long long w) { return (int)(w >> 8) + i; }

void *worker(void *arg) {
  tls_value = 11;
  pthread_barrier_wait(&ready);
  pthread_barrier_wait(&ready);
  return arg;
}

void worker_ready(void) {}
void loop_done(int total) { (void)total; }

int main(int argc, char **argv) {
  int local = 41;
  pthread_t thread;
  pthread_barrier_init(&ready, NULL, 2);
  pthread_create(&thread, NULL, worker, NULL);
  pthread_barrier_wait(&ready);
  worker_ready();
  pthread_barrier_wait(&ready);
  pthread_join(thread, NULL);
  local = add(local, 1);
  local = add(local, 2);
  if (argc > 1 && strcmp(argv[1], "loop") == 0)
    for (int i = 0; i < 5; i++)
      local += traced_point(i, wide + i);
  if (argc > 1 && strcmp(argv[1], "loop") == 0)
    loop_done(local);
  if (argc > 1 && strcmp(argv[1], "fault") == 0)
    *(volatile int *)0x10 = local;
  printf("counter=%d local=%d %s\n", counter, local, greeting);
  return 0;
}
