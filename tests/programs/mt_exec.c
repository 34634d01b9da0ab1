/* exec from a thread that is not the leader: a worker execs this program again with the argument
 * "after"; the new image calls after_exec() and exits with status 5. The leader meanwhile waits in
 * pthread_join (the kernel ends it and gives the worker its thread id).
 * Usage: mt_exec [after] */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char self[4096];

int after_exec(void) { return 5; }

void before_exec(void) {}

static void *worker(void *arg) {
  before_exec();
  execl(self, self, "after", (char *)NULL);
  perror("execl");
  return arg;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "after") == 0) {
    printf("mt_exec: new image in pid %d\n", (int)getpid());
    return after_exec();
  }
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 1;
  self[n] = 0;
  pthread_t t;
  pthread_create(&t, NULL, worker, NULL);
  pthread_join(t, NULL);
  return 1; /* not reached: the exec replaces the process */
}
