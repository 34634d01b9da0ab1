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

// GDBTRACE_PROBE_EMULATE where the module's load-time self-test turned
// emulation on (INIT's GDBTRACE_FEAT_EMULATE), else 0: on a kernel that
// single-steps after a moved ip the module refuses the flag (EOPNOTSUPP), and
// the tests that emulate check the single-stepped path instead.
static inline uint32_t emu_flag(void) {
  static int cached = -1;
  if (cached < 0) {
    struct session s;
    cached = open_session(&s, 16) == 0 && (s.init.features & GDBTRACE_FEAT_EMULATE);
    close_session(&s);
  }
  return cached ? GDBTRACE_PROBE_EMULATE : 0;
}

static inline struct gdbtrace_probe_status probe_status(struct session* s, uint32_t id) {
  struct gdbtrace_probe_status st = {.id = id};
  ioctl(s->fd, GDBTRACE_IOC_PROBE_STATUS, &st);
  return st;
}

// ---- a ptraced child running FN(ARG) once released ----

struct child {
  pid_t pid;
  int go_fd;
};

// Forks a child that makes its parent its ptracer, closes inherited session
// fds, waits for a byte on the pipe, then exits with FN(ARG).
static inline struct child start_child(int (*fn)(long), long arg) {
  int go[2], ready[2];
  if (pipe(go) || pipe(ready))
    abort();
  pid_t pid = fork();
  if (pid == 0) {
    char c;
    if (ptrace(PTRACE_TRACEME, 0, NULL, NULL))
      _exit(2);
    for (int fd = 3; fd < 256; fd++)
      if (fd != go[0] && fd != ready[1])
        close(fd);
    if (write(ready[1], "r", 1) != 1 || read(go[0], &c, 1) != 1)
      _exit(3);
    _exit(fn(arg));
  }
  close(go[0]);
  close(ready[1]);
  char c;
  if (read(ready[0], &c, 1) != 1)
    abort();
  close(ready[0]);
  return (struct child){pid, go[1]};
}

static inline int release_child(struct child c) {
  if (write(c.go_fd, "g", 1) != 1)
    return -1;
  close(c.go_fd);
  return wait_traced(c.pid);
}

// ADD the probe A describes (pid, address, tracepoint, actions, condition, flags) in FILE
// (default this executable) at the file offset the pid's maps give: A gets the module's answer
// (id, emulation recipe). 0 or -errno.
static inline int add_described(struct session* s, const char* file, struct gdbtrace_probe_add* a) {
  int fd = open(file ? file : "/proc/self/exe", O_RDONLY | O_CLOEXEC);
  a->fd = fd;
  a->offset = file_offset_of(a->pid, a->address);
  int r = ioctl(s->fd, GDBTRACE_IOC_ADD, a);
  int e = errno;
  close(fd);
  return r ? -e : 0;
}

// ADD a probe at ADDR (in FILE, default this executable) of process PID.
static inline int add_at(struct session* s, pid_t pid, const char* file, uintptr_t addr,
                         uint32_t flags, struct gdbtrace_action* acts, uint32_t nacts,
                         struct gdbtrace_probe_add* out) {
  struct gdbtrace_probe_add a = {.pid = pid,
                                 .address = addr,
                                 .tp_number = 1,
                                 .nr_actions = nacts,
                                 .actions = (uintptr_t)acts,
                                 .flags = flags};
  int r = add_described(s, file, &a);
  if (out)
    *out = a;
  return r;
}

// ---- the probed function of the tests that need just one ----

static volatile long gt_sink;

// Not inlined into its callers: its address is a real function entry to probe.
static __attribute__((noinline, unused)) long probe_fn(long a) {
  gt_sink += a;
  return gt_sink;
}

// A start_child() body: N calls of probe_fn.
static __attribute__((unused)) int call_probe_fn(long n) {
  for (long i = 0; i < n; i++)
    probe_fn(i);
  return 0;
}

#endif
