/* A 64-bit program that execs the i386 program m32_demo (same directory): the exec stop must make
   gdb read the new process's i386 target description. */
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

void before_exec(void) {}

int main(void) {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 32);
  if (n < 0) return 2;
  self[n] = 0;
  char target[PATH_MAX];
  snprintf(target, sizeof target, "%s/m32_demo", dirname(self));
  before_exec();
  execl(target, target, (char *)NULL);
  perror("execl");
  return 1;
}
