// Guest test of issue 26's memory accounting, run as root: a session's
// memory (rings, probes, programs) is charged to its caller's memory cgroup,
// and a request past the cgroup's limit fails with ENOMEM while the caller
// lives on -- neither the host's memory (uncharged: the request succeeds) nor
// the cgroup's OOM killer (charged without __GFP_RETRY_MAYFAIL: the caller is
// killed) pays for it.
// Prints "ok NAME" / "FAIL NAME: why"; exit status = number of failures.
#include "gt_util.h"

#include <sys/mount.h>

#define CG "/sys/fs/cgroup"
#define GROUP CG "/gt_memcg"

static int write_file(const char* path, const char* text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  int r = write(fd, text, strlen(text)) == (ssize_t)strlen(text) ? 0 : -errno;
  close(fd);
  return r;
}

static long long read_number(const char* path, const char* key) {
  char line[256];
  long long v = -1;
  FILE* f = fopen(path, "r");
  while (f && fgets(line, sizeof line, f)) {
    size_t n = key ? strlen(key) : 0;
    if (!key)
      v = atoll(line);
    else if (!strncmp(line, key, n) && line[n] == ' ')
      v = atoll(line + n + 1);
  }
  if (f)
    fclose(f);
  return v;
}

// A fresh cgroup with the memory controller and LIMIT bytes: 0, or -errno.
static int make_group(long long limit) {
  if (access(CG "/cgroup.controllers", F_OK) && mount("none", CG, "cgroup2", 0, NULL))
    return -errno;
  int r = write_file(CG "/cgroup.subtree_control", "+memory");
  if (r)
    return r;
  rmdir(GROUP);
  if (mkdir(GROUP, 0755))
    return -errno;
  char text[32];
  snprintf(text, sizeof text, "%lld", limit);
  return write_file(GROUP "/memory.max", text);
}

// In the cgroup: a small session opens; one whose rings (16 MiB per CPU)
// pass the 16 MiB limit gets ENOMEM. Exit 0, or 30 + what INIT gave.
static int rings_in_group(void) {
  if (write_file(GROUP "/cgroup.procs", "0"))
    return 10;
  struct session small, big;
  if (open_session(&small, 16))
    return 11;
  int r = open_session(&big, 24);
  close_session(&small);
  return r == -ENOMEM ? 0 : 30 - r;
}

// In the cgroup, limited to what it uses now plus 512 KiB: a tracee's probe
// of 64 programs of 4 KiB each (~260 KiB charged per ADD) is added until ADD
// gives ENOMEM, within a few. Exit 0, or 30 + the last ADD's result.
static int adds_in_group(void) {
  enum { PROGS = 64, LEN = 4096, MAX_ADDS = 16 };
  static uint8_t prog[LEN];
  for (int i = 0; i + 3 < LEN; i += 3) {
    prog[i] = 0x22; // const8 1; pop
    prog[i + 1] = 1;
    prog[i + 2] = 0x29;
  }
  prog[LEN - 1] = 0x27; // end
  static struct gdbtrace_action acts[PROGS];
  for (int i = 0; i < PROGS; i++)
    acts[i] =
        (struct gdbtrace_action){.kind = GDBTRACE_ACT_EXPR, .len = LEN, .code = (uintptr_t)prog};
  if (write_file(GROUP "/cgroup.procs", "0"))
    return 10;
  struct session s;
  if (open_session(&s, 16))
    return 11;
  struct child c = start_child(call_probe_fn, 1);
  char text[32];
  snprintf(text, sizeof text, "%lld", read_number(GROUP "/memory.current", NULL) + (512 << 10));
  if (write_file(GROUP "/memory.max", text))
    return 12;
  int r = 0, n = 0;
  while (n < MAX_ADDS &&
         (r = add_at(&s, c.pid, NULL, (uintptr_t)probe_fn, 0, acts, PROGS, NULL)) == 0)
    n++;
  printf("gt_memcg: %d ADDs of %d KiB of programs before ADD gave %d\n", n, PROGS * LEN >> 10, r);
  close_session(&s);
  release_child(c);
  return r == -ENOMEM && n >= 1 ? 0 : 30 - r;
}

// FN in a child (it joins the cgroup; we stay outside): "ok" only when it
// exited 0 -- killed (SIGKILL from the OOM killer) or another result fails.
static void run_in_group(const char* name, int (*fn)(void), long long limit) {
  int r = make_group(limit);
  if (r) {
    printf("FAIL %s: memory cgroup: %s\n", name, strerror(-r));
    failures++;
    return;
  }
  pid_t pid = fork();
  if (pid == 0)
    _exit(fn());
  int st;
  waitpid(pid, &st, 0);
  long long kills = read_number(GROUP "/memory.events", "oom_kill"),
            max = read_number(GROUP "/memory.events", "max");
  rmdir(GROUP);
  if (WIFSIGNALED(st))
    printf(
        "FAIL %s: the caller was killed (signal %d, oom_kill %lld): the OOM killer, not ENOMEM\n",
        name, WTERMSIG(st), kills);
  else if (WEXITSTATUS(st) >= 30)
    printf("FAIL %s: the request gave %d, not ENOMEM (uncharged: the host's memory paid)\n", name,
           30 - WEXITSTATUS(st));
  else if (WEXITSTATUS(st) != 0)
    printf("FAIL %s: set-up step %d failed\n", name, WEXITSTATUS(st));
  else if (max <= 0 || kills != 0)
    printf("FAIL %s: memory.events max %lld, oom_kill %lld\n", name, max, kills);
  else {
    printf("ok %s\n", name);
    return;
  }
  failures++;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  run_in_group("test_rings_charged_to_memcg", rings_in_group, 16 << 20);
  run_in_group("test_adds_charged_to_memcg", adds_in_group, 1ll << 30);
  printf("gt_memcg: %d failure(s)\n", failures);
  return failures != 0;
}
