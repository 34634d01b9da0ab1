// Guest tests of issue 26, run as root in the QEMU guest after gt_safety:
//  - the module, not the stub, decides whether emulation is safe: INIT names
//    exactly one of EMULATE / EMU_DOUBLE / EMU_UNTESTED, an emulated
//    instruction runs once, and without EMULATE an ADD asking for it is
//    refused (EOPNOTSUPP);
//  - a process whose thread-group leader exited is probed through a live
//    thread (was ESRCH);
//  - a user given the device through a group probes its own tracee; a
//    non-dumpable one is refused to it, as PTRACE_PEEKDATA refuses it (was
//    accepted), and accepted for root;
//  - every program of one hit shares one step budget, straight-line ones
//    too (45 programs of 2 601 steps each ran whole before);
//  - ADDs are throttled per user: a burst of GDBTRACE_ADD_BURST, then
//    GDBTRACE_ADD_RATE per second, not refilled by reopening the device.
// Prints "ok NAME" / "FAIL NAME: why"; exit status = number of failures.
#include "gt_util.h"

#include <grp.h>
#include <pthread.h>
#include <sys/resource.h>

// add $1,%rdi (emulated where the module allows it); returns arg + 1 when it ran once.
long limits_emu_fn(long);
__asm__(".text\n.globl limits_emu_fn\n.type limits_emu_fn,@function\nlimits_emu_fn:\n"
        " add $1,%rdi\n mov %rdi,%rax\n ret\n");

static struct gdbtrace_action regs_action = {.kind = GDBTRACE_ACT_REGS};

// ADD an 'R' probe at probe_fn of PID, a fork of this executable, with the
// file offset from our own maps: a zombie leader's /proc/PID/maps is empty,
// and a non-dumpable process's is not readable by its unprivileged tracer.
static int add_own_offset(struct session* s, pid_t pid, uint32_t* id) {
  int exe = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  struct gdbtrace_probe_add a = {.pid = pid,
                                 .fd = exe,
                                 .offset = file_offset_of(getpid(), (uintptr_t)probe_fn),
                                 .address = (uintptr_t)probe_fn,
                                 .tp_number = 1,
                                 .nr_actions = 1,
                                 .actions = (uintptr_t)&regs_action};
  int r = ioctl(s->fd, GDBTRACE_IOC_ADD, &a) ? -errno : 0;
  close(exe);
  if (id)
    *id = a.id;
  return r;
}

static int call_emu_fn(long n) {
  for (long i = 0; i < n; i++)
    if (limits_emu_fn(i) != i + 1)
      return 20; // the instruction ran twice
  return 0;
}

static void test_emulation_decided_by_module(void) {
  struct session s;
  CHECK(open_session(&s, 16) == 0, "open");
  uint32_t f = s.init.features;
  uint32_t states = !!(f & GDBTRACE_FEAT_EMULATE) + !!(f & GDBTRACE_FEAT_EMU_DOUBLE) +
                    !!(f & GDBTRACE_FEAT_EMU_UNTESTED);
  CHECK(states == 1, "features %#x: not exactly one emulation state", f);
  printf("gt_limits: module emulation self-test: %s\n",
         f & GDBTRACE_FEAT_EMULATE      ? "kernel skips the single-step, emulation on"
         : f & GDBTRACE_FEAT_EMU_DOUBLE ? "kernel single-steps after a moved ip, emulation off"
                                        : "could not run, emulation off");
  struct child c = start_child(call_emu_fn, 200);
  struct gdbtrace_probe_add a;
  int r = add_at(&s, c.pid, NULL, (uintptr_t)limits_emu_fn, GDBTRACE_PROBE_EMULATE, &regs_action, 1,
                 &a);
  if (f & GDBTRACE_FEAT_EMULATE) {
    CHECK(r == 0 && a.emu.op == GDBTRACE_EMU_ADD_IMM, "add: %s, op %u", strerror(-r), a.emu.op);
  } else {
    CHECK(r == -EOPNOTSUPP, "emulating ADD without FEAT_EMULATE: %s", strerror(-r));
  }
  CHECK(ioctl(s.fd, GDBTRACE_IOC_START) == 0, "start");
  int rc = release_child(c);
  CHECK(rc == 0, "tracee exit %d (20: the probed instruction ran twice)", rc);
  if (f & GDBTRACE_FEAT_EMULATE) {
    struct gdbtrace_probe_status st = probe_status(&s, a.id);
    CHECK(st.emulated == 200, "emulated %llu of 200", (unsigned long long)st.emulated);
  }
  close_session(&s);
  OK();
}

// ---- a tracee whose leader exits, leaving a worker thread ----

static int leader_go[2];

static void* worker(void* n) {
  char c;
  if (read(leader_go[0], &c, 1) != 1)
    _exit(3);
  call_probe_fn((long)n);
  _exit(0); // exit_group: the zombie leader goes with it
}

static char proc_state(pid_t pid) {
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  int fd = open(path, O_RDONLY);
  ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
  if (fd >= 0)
    close(fd);
  if (n <= 0)
    return '?';
  buf[n] = 0;
  char* p = strrchr(buf, ')');
  return p && p[1] && p[2] ? p[2] : '?';
}

static void test_leader_exited(void) {
  enum { N = 50 };
  int ready[2];
  CHECK(pipe(leader_go) == 0 && pipe(ready) == 0, "pipe");
  pid_t pid = fork();
  if (pid == 0) {
    if (ptrace(PTRACE_TRACEME, 0, NULL, NULL))
      _exit(2);
    pthread_t th;
    pthread_create(&th, NULL, worker, (void*)(long)N);
    if (write(ready[1], "r", 1) != 1)
      _exit(3);
    pthread_exit(NULL); // the leader exits; the worker runs on
  }
  close(ready[1]);
  char c;
  CHECK(read(ready[0], &c, 1) == 1, "ready");
  for (int i = 0; i < 500 && proc_state(pid) != 'Z'; i++)
    usleep(10000);
  CHECK(proc_state(pid) == 'Z', "leader state %c", proc_state(pid));
  struct session s;
  CHECK(open_session(&s, 16) == 0, "open");
  uint32_t id = 0;
  int r = add_own_offset(&s, pid, &id);
  CHECK(ioctl(s.fd, GDBTRACE_IOC_START) == 0, "start");
  CHECK(write(leader_go[1], "g", 1) == 1, "go");
  int rc = wait_traced(pid);
  struct gdbtrace_probe_status st = probe_status(&s, id);
  close_session(&s);
  CHECK(r == 0, "add with the leader gone: %s", strerror(-r));
  CHECK(rc == 0, "tracee exit %d", rc);
  CHECK(st.frames == N, "frames %llu of %d", (unsigned long long)st.frames, N);
  OK();
}

static int tracee_probe_fn(long n) {
  return call_probe_fn(n);
}

enum { DEV_GROUP = 4242 };

// As UID (0: root; others get the device through group DEV_GROUP, as the
// shipped udev rule grants it): a tracee, made non-dumpable unless DUMPABLE.
// Exit 0 when ADD gave WANT (0 or a negative errno), 30 + what it gave otherwise.
static int probe_tracee_as(uid_t uid, int dumpable, int want) {
  gid_t group = DEV_GROUP;
  if (uid && (setgroups(1, &group) || setgid(uid) || setuid(uid)))
    return 10;
  prctl(PR_SET_DUMPABLE, 1); // a uid change clears it; our tracee must be ptraceable
  struct session s;
  if (open_session(&s, 16))
    return 12;
  int go[2], ready[2];
  if (pipe(go) || pipe(ready))
    return 13;
  pid_t pid = fork();
  if (pid == 0) {
    char c;
    if (ptrace(PTRACE_TRACEME, 0, NULL, NULL))
      _exit(2);
    if (!dumpable)
      prctl(PR_SET_DUMPABLE, 0); // as a program holding secrets does
    if (write(ready[1], "r", 1) != 1 || read(go[0], &c, 1) != 1)
      _exit(3);
    _exit(tracee_probe_fn(5));
  }
  char c;
  if (read(ready[0], &c, 1) != 1)
    return 14;
  int r = add_own_offset(&s, pid, NULL);
  if (write(go[1], "g", 1) != 1)
    return 15;
  wait_traced(pid);
  close_session(&s);
  return r == want ? 0 : 30 - r;
}

static int run_as(uid_t uid, int dumpable, int want) {
  int st;
  pid_t c = fork();
  if (c == 0)
    _exit(probe_tracee_as(uid, dumpable, want));
  waitpid(c, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// A user given the device through its group probes its own tracee, but not
// one that made itself non-dumpable; root may.
static void test_nondumpable(void) {
  CHECK(chown(GDBTRACE_DEVICE, 0, DEV_GROUP) == 0 && chmod(GDBTRACE_DEVICE, 0660) == 0, "chown");
  int own = run_as(65534, 1, 0), secret = run_as(65534, 0, -EPERM);
  chown(GDBTRACE_DEVICE, 0, 0);
  chmod(GDBTRACE_DEVICE, 0600);
  int root = run_as(0, 0, 0);
  CHECK(own == 0, "nobody (device group) probing its tracee: status %d (30+errno)", own);
  CHECK(secret == 0, "nobody probing a non-dumpable tracee: status %d (30: accepted)", secret);
  CHECK(root == 0, "root probing a non-dumpable tracee: status %d (30+errno: refused)", root);
  OK();
}

// 45 straight-line programs of 2 601 steps each (const8 1; pop; ... end):
// 117 045 steps per hit, past GT_HIT_STEP_BUDGET (100 000): the last ones
// must fail (counted in errors), the frame still goes out.
static void test_step_budget_per_hit(void) {
  enum { REPS = 1300, PROGS = 45, HITS = 3 };
  static uint8_t prog[REPS * 3 + 1];
  for (int i = 0; i < REPS; i++) {
    prog[3 * i] = 0x22; // const8
    prog[3 * i + 1] = 1;
    prog[3 * i + 2] = 0x29; // pop
  }
  prog[REPS * 3] = 0x27; // end
  struct gdbtrace_action acts[PROGS + 1] = {{.kind = GDBTRACE_ACT_REGS}};
  for (int i = 1; i <= PROGS; i++)
    acts[i] = (struct gdbtrace_action){
        .kind = GDBTRACE_ACT_EXPR, .len = sizeof prog, .code = (uintptr_t)prog};
  struct session s;
  CHECK(open_session(&s, 16) == 0, "open");
  struct child c = start_child(call_probe_fn, HITS);
  struct gdbtrace_probe_add a;
  int r = add_at(&s, c.pid, NULL, (uintptr_t)probe_fn, 0, acts, PROGS + 1, &a);
  CHECK(r == 0, "add: %s", strerror(-r));
  CHECK(ioctl(s.fd, GDBTRACE_IOC_START) == 0, "start");
  int rc = release_child(c);
  struct gdbtrace_probe_status st = probe_status(&s, a.id);
  close_session(&s);
  CHECK(rc == 0, "tracee exit %d", rc);
  CHECK(st.frames == HITS, "frames %llu", (unsigned long long)st.frames);
  CHECK(st.errors >= HITS && st.errors < HITS * PROGS,
        "errors %llu: every hit must run out of its one budget, and only then",
        (unsigned long long)st.errors);
  OK();
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static long voluntary_switches(void) {
  struct rusage ru;
  getrusage(RUSAGE_THREAD, &ru);
  return ru.ru_nvcsw;
}

// The ADD throttle is a token bucket per user: GDBTRACE_ADD_BURST at once,
// then GDBTRACE_ADD_RATE per second. From a full bucket (the earlier tests'
// few ADDs are earned back within 1.1 s):
//  - BURST ADDs never sleep (no voluntary context switch: the check does not
//    depend on how fast the guest is);
//  - BURST + 2 * RATE + 1 ADDs take >= 2 s, however fast each one is;
//  - closing the session and opening a new one does not refill the bucket.
// ADDs with fd -1 fail (EBADF) after the throttle, so they spend their token
// without registering a uprobe each; the last ADD is a real one.
static void test_add_rate_bounded(void) {
  enum { BURST = GDBTRACE_ADD_BURST, MORE = 2 * GDBTRACE_ADD_RATE + 1 };
  struct session s;
  CHECK(open_session(&s, 16) == 0, "open");
  struct child c = start_child(call_probe_fn, 1);
  int exe = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  struct gdbtrace_probe_add a = {.pid = c.pid,
                                 .fd = -1,
                                 .offset = file_offset_of(c.pid, (uintptr_t)probe_fn),
                                 .address = (uintptr_t)probe_fn,
                                 .tp_number = 1,
                                 .flags = GDBTRACE_PROBE_DISABLED};
  usleep(1100000);
  double t0 = now_s();
  long sw0 = voluntary_switches();
  int ebadf = 0;
  for (int i = 0; i < BURST; i++)
    ebadf += ioctl(s.fd, GDBTRACE_IOC_ADD, &a) != 0 && errno == EBADF;
  double t_burst = now_s() - t0;
  long burst_switches = voluntary_switches() - sw0;
  // Reopening must not refill the bucket.
  close_session(&s);
  CHECK(open_session(&s, 16) == 0, "reopen");
  long sw1 = voluntary_switches();
  for (int i = 0; i < MORE - 1; i++)
    ebadf += ioctl(s.fd, GDBTRACE_IOC_ADD, &a) != 0 && errno == EBADF;
  a.fd = exe;
  a.id = 0;
  int last = ioctl(s.fd, GDBTRACE_IOC_ADD, &a) ? -errno : 0;
  double dt = now_s() - t0;
  long more_switches = voluntary_switches() - sw1;
  close(exe);
  close_session(&s);
  int rc = release_child(c);
  CHECK(ebadf == BURST + MORE - 1, "%d of %d ADDs with fd -1 failed with EBADF", ebadf,
        BURST + MORE - 1);
  CHECK(last == 0, "the real ADD after them: %d", last);
  CHECK(burst_switches < 20, "%d ADDs of a full bucket slept (%ld voluntary switches)", BURST,
        burst_switches);
  CHECK(more_switches > 0, "%d ADDs past the burst never slept", MORE);
  CHECK(dt >= 1.9, "%d ADDs took %.2f s: not held to %d/s past a burst of %d", BURST + MORE, dt,
        GDBTRACE_ADD_RATE, BURST);
  CHECK(rc == 0, "tracee exit %d", rc);
  printf("gt_limits: %d ADDs of a full bucket in %.2f s (%ld switches), %d in all in %.2f s\n",
         BURST, t_burst, burst_switches, BURST + MORE, dt);
  OK();
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  test_emulation_decided_by_module();
  test_leader_exited();
  test_nondumpable();
  test_step_budget_per_hit();
  test_add_rate_bounded();
  printf("gt_limits: %d failure(s)\n", failures);
  return failures != 0;
}
