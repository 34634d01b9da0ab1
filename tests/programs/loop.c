/* Runs for a long time so a test can attach to it, detach, and see it still running.
 * Every ~10 ms it calls tick() and rewrites the heartbeat file (argv[1], optional) with the count;
 * at the end it prints "loop done: N ticks".
 * Usage: loop [heartbeat-file or - for none] [seconds to run (default 600)] */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

volatile long ticks;

void tick(void) { ticks++; }

/* Written to a temporary file and renamed, so a reader never sees a half-written count. */
static void write_heartbeat(const char *path) {
  char line[32], tmp[4096];
  int len = snprintf(line, sizeof line, "%ld\n", ticks);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  if (write(fd, line, len) < 0) { /* best effort: the test will notice a stale heartbeat */ }
  close(fd);
  rename(tmp, path);
}

int main(int argc, char **argv) {
  const char *heartbeat = argc > 1 && argv[1][0] && strcmp(argv[1], "-") != 0 ? argv[1] : NULL;
  long seconds = argc > 2 ? atol(argv[2]) : 600;
  time_t end = time(NULL) + seconds;
  printf("loop pid %d\n", (int)getpid());
  fflush(stdout);
  while (time(NULL) < end) {
    tick();
    if (heartbeat) write_heartbeat(heartbeat);
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  printf("loop done: %ld ticks\n", ticks); /* a detached tracee must get here */
  return 0;
}
