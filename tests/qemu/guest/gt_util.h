// Helpers shared by the guest test programs (gt_test.c, gt_safety.c): one
// translation unit each, so everything here is static.
#ifndef GT_UTIL_H
#define GT_UTIL_H
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gdbtrace_uapi.h"

static int failures;
#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      printf("FAIL %s:%d: ", __func__, __LINE__);                                                  \
      printf(__VA_ARGS__);                                                                         \
      printf("\n");                                                                                \
      failures++;                                                                                  \
      return;                                                                                      \
    }                                                                                              \
  } while (0)
#define OK() printf("ok %s\n", __func__)

enum { GT_REGBLOCK = 816 };

// File offset of ADDR in process PID, from its maps (UINT64_MAX if unmapped).
static inline uint64_t file_offset_of(pid_t pid, uintptr_t addr) {
  char path[64], line[512];
  snprintf(path, sizeof path, "/proc/%d/maps", pid);
  FILE* f = fopen(path, "r");
  uint64_t off = UINT64_MAX;
  while (f && fgets(line, sizeof line, f)) {
    unsigned long lo, hi, pgoff;
    char perms[8];
    if (sscanf(line, "%lx-%lx %7s %lx", &lo, &hi, perms, &pgoff) == 4 && addr >= lo && addr < hi) {
      off = addr - lo + pgoff;
      break;
    }
  }
  if (f)
    fclose(f);
  return off;
}

// Waits for a traced child to end, resuming it from ptrace stops (the exec
// SIGTRAP; other signals are passed on). Its exit status, or 128 + signal.
static inline int wait_traced(pid_t pid) {
  int st;
  for (;;) {
    if (waitpid(pid, &st, 0) != pid)
      return -1;
    if (!WIFSTOPPED(st))
      return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    int sig = WSTOPSIG(st) == SIGTRAP ? 0 : WSTOPSIG(st);
    ptrace(PTRACE_CONT, pid, NULL, (void*)(long)sig);
  }
}

static inline int expect_errno(int fd, unsigned long cmd, void* arg, int want) {
  errno = 0;
  int r = ioctl(fd, cmd, arg);
  return r == -1 && errno == want;
}

struct session {
  int fd;
  struct gdbtrace_init init;
  uint8_t* map;
};

static inline int open_session(struct session* s, unsigned ring_shift) {
  memset(s, 0, sizeof *s);
  s->fd = open(GDBTRACE_DEVICE, O_RDWR | O_CLOEXEC);
  if (s->fd < 0)
    return -errno;
  s->init.version = GDBTRACE_UAPI_VERSION;
  s->init.regblock_size = GT_REGBLOCK;
  s->init.ring_shift = ring_shift;
  if (ioctl(s->fd, GDBTRACE_IOC_INIT, &s->init))
    return -errno;
  s->map = mmap(NULL, s->init.mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
  if (s->map == MAP_FAILED)
    return -errno;
  madvise(s->map, s->init.mmap_size, MADV_DONTFORK);
  return 0;
}

static inline void close_session(struct session* s) {
  if (s->map && s->map != MAP_FAILED)
    munmap(s->map, s->init.mmap_size);
  close(s->fd);
}

static inline struct gdbtrace_probe_status probe_status(struct session* s, uint32_t id) {
  struct gdbtrace_probe_status st = {.id = id};
  ioctl(s->fd, GDBTRACE_IOC_PROBE_STATUS, &st);
  return st;
}

#endif
