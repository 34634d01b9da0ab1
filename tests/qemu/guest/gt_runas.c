// gt_runas UID GID[,GROUP...] PROG ARGS...: runs PROG as an unprivileged user
// (real, effective and saved ids; supplementary groups as listed), the way a
// login gives a user the gdbtrace group. busybox's setpriv cannot change ids.
#define _GNU_SOURCE
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: gt_runas UID GID[,GROUP...] PROG ARGS...\n");
    return 2;
  }
  uid_t uid = (uid_t)strtoul(argv[1], NULL, 10);
  gid_t groups[16];
  int n = 0;
  for (char* g = strtok(argv[2], ","); g && n < 16; g = strtok(NULL, ","))
    groups[n++] = (gid_t)strtoul(g, NULL, 10);
  if (setgroups(n - 1, groups + 1) || setresgid(groups[0], groups[0], groups[0]) ||
      setresuid(uid, uid, uid)) {
    perror("gt_runas");
    return 2;
  }
  execv(argv[3], argv + 3);
  perror(argv[3]);
  return 127;
}
