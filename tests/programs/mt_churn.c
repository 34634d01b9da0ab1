/* Thread churn: creates short-lived threads without pause (up to BATCH alive at a time), so an
 * attach meets clones being created and threads gone before they can be stopped. Writes the number
 * of threads finished so far to HEARTBEAT_FILE (if given) about every 10 ms, so a test can tell that
 * the process runs on after a detach.
 * Usage: mt_churn [heartbeat_file|-] [seconds (default 60)] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BATCH 4

static volatile unsigned long finished_threads;

static void *short_life(void *arg) {
  volatile int work = 0;
  for (int i = 0; i < 1000; i++) work += i;
  __atomic_add_fetch(&finished_threads, 1, __ATOMIC_RELAXED);
  return arg;
}

static void write_heartbeat(const char *path) {
  if (!path) return;
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) return;
  fprintf(f, "%lu\n", finished_threads);
  fclose(f);
  rename(tmp, path);
}

int main(int argc, char **argv) {
  const char *heartbeat = argc > 1 && strcmp(argv[1], "-") != 0 ? argv[1] : NULL;
  time_t end = time(NULL) + (argc > 2 ? atol(argv[2]) : 60);
  struct timespec last = {0, 0};
  while (time(NULL) < end) {
    pthread_t threads[BATCH];
    for (int i = 0; i < BATCH; i++) pthread_create(&threads[i], NULL, short_life, NULL);
    for (int i = 0; i < BATCH; i++) pthread_join(threads[i], NULL);
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if ((now.tv_sec - last.tv_sec) * 1000000000L + (now.tv_nsec - last.tv_nsec) > 10000000L) {
      write_heartbeat(heartbeat);
      last = now;
    }
  }
  printf("mt_churn done: %lu threads\n", finished_threads);
  return 0;
}
