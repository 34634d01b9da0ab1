/* A multithreaded program that counts its own calls of a libc function, for tracing it attached:
 * THREADS threads (default 4) start at once and idle; after WAIT_MS (default 1000: time for a
 * debugger to attach to the running process) they call getppid() in bursts of BURST (default 10)
 * every 5 ms for SECONDS (default 10), checking every result, then the program prints the calls
 * each thread made and their total, and calls calls_done() (a place for a breakpoint once every
 * call is made). Each call also goes through mlc_site (optimised: its first instruction is a 7-byte
 * rip-relative load, a jump pad site in the executable, terabytes from libc's getppid).
 * Usage: mt_libc_calls [SECONDS [THREADS [WAIT_MS [BURST]]]] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile int go, stop;
static int burst = 10;
static pid_t parent;
static long counts[16], bad[16];

volatile long mlc_bias = 1;

__attribute__((noinline, optimize("O2"))) long mlc_site(long x) {
  return x + mlc_bias;
}

__attribute__((noinline)) void calls_done(void) {
  __asm__ volatile("");
}

static void* worker(void* arg) {
  long i = (long)arg;
  while (!go)
    usleep(1000);
  while (!stop) {
    for (int k = 0; k < burst; k++) {
      if (getppid() != parent || mlc_site(k) != k + 1)
        bad[i]++;
      counts[i]++;
    }
    usleep(5000);
  }
  return NULL;
}

int main(int argc, char** argv) {
  int seconds = argc > 1 ? atoi(argv[1]) : 10;
  int threads = argc > 2 ? atoi(argv[2]) : 4;
  long wait_ms = argc > 3 ? atol(argv[3]) : 1000;
  if (argc > 4 && atoi(argv[4]) > 0)
    burst = atoi(argv[4]);
  pthread_t tids[16];
  if (threads < 1 || threads > 16)
    threads = 4;
  parent = getppid();
  for (long i = 0; i < threads; i++)
    pthread_create(&tids[i], NULL, worker, (void*)i);
  usleep(wait_ms * 1000);
  go = 1;
  sleep(seconds);
  stop = 1;
  long total = 0, wrong = 0;
  for (int i = 0; i < threads; i++) {
    pthread_join(tids[i], NULL);
    printf("thread %d calls=%ld\n", i, counts[i]);
    total += counts[i];
    wrong += bad[i];
  }
  printf("getppid calls=%ld wrong=%ld\n", total, wrong);
  fflush(stdout);
  calls_done();
  return 0;
}
