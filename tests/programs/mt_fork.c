/* fork() in one thread while others run: workers spin; main forks children that exit with status
 * 3 at once, and waits for each. With `forkers` > 0, that many workers fork in a loop as well, so a
 * fork event is often pending when the debugger stops the process or detaches.
 * Usage: mt_fork [rounds (default 3)] [forkers (default 0)] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define WORKERS 3

volatile unsigned long spins[WORKERS];
static volatile int finished;
static int forkers;

void main_marker(int round) { __asm__ volatile("" ::"r"(round) : "memory"); }

static int fork_and_wait(void) {
  pid_t child = fork();
  if (child == 0) _exit(3);
  int status = 0;
  pid_t w = waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 3) /* say what went wrong before aborting */
    printf("mt_fork: child %d: waitpid %d status 0x%x\n", (int)child, (int)w, status), fflush(stdout);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void *worker(void *arg) {
  int index = (int)(long)arg;
  while (!finished) {
    spins[index]++;
    if (index < forkers && fork_and_wait() != 3) abort();
  }
  return NULL;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 3;
  forkers = argc > 2 ? atoi(argv[2]) : 0;
  pthread_t threads[WORKERS];
  for (long i = 0; i < WORKERS; i++) pthread_create(&threads[i], NULL, worker, (void *)i);
  int statuses = 0;
  for (int round = 0; round < rounds; round++) {
    main_marker(round);
    int status = fork_and_wait(); /* FORK_LINE */
    statuses += status;
    usleep(1000);
  }
  finished = 1;
  for (int i = 0; i < WORKERS; i++) pthread_join(threads[i], NULL);
  printf("mt_fork done: %d rounds, statuses %d\n", rounds, statuses);
  return statuses == 3 * rounds ? 0 : 1;
}
