/* Calls before_exec(), then execs exec_target (same directory) with the argument "from-exec". */
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void before_exec(void) {}

int main(void) {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 32);
  if (n < 0) return 2;
  self[n] = 0;
  char target[PATH_MAX];
  snprintf(target, sizeof target, "%s/exec_target", dirname(self));
  before_exec();
  execl(target, target, "from-exec", (char *)NULL);
  perror("execl");
  return 1;
}
