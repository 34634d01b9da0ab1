// Guest tests for the safety rules of gdbtrace.ko (issue 10), run as root in
// the QEMU guest after gt_test:
//  - only the target's ptracer may probe it (root gets no exception);
//  - an exec of a setuid binary racing with ADD never yields a probe on the
//    privileged image;
//  - mmap and ADD from two threads of one session do not deadlock;
//  - emulated 32/64-bit stores are never seen torn by another thread;
//  - no emulation while hardware watchpoints are armed;
//  - a 32-bit (-m32) tracee is never emulated (gt_test32 is that tracee);
//  - `teval $x = $x + 1` from four threads loses no increment;
//  - one user holds at most 8 sessions.
// Prints "ok NAME" / "FAIL NAME: why" (and "SKIP NAME: why"); exit status =
// number of failures. `gt_safety victim` is the setuid image of the race test.
#include "gt_util.h"

#include <pthread.h>
#include <stddef.h>
#include <sys/user.h>

// Emulated stores (mov %rsi,(%rdi) / mov %esi,(%rdi)), each the first
// instruction of its function.
void store64(volatile uint64_t* p, uint64_t v);
void store32(volatile uint32_t* p, uint32_t v);
__asm__(".text\n"
        ".globl store64\n.type store64,@function\nstore64:\n mov %rsi,(%rdi)\n ret\n"
        ".globl store32\n.type store32,@function\nstore32:\n mov %esi,(%rdi)\n ret\n");

static struct gdbtrace_action regs_action = {.kind = GDBTRACE_ACT_REGS};

static int pause_forever(long unused) {
  (void)unused;
  for (;;)
    pause();
  return 0;
}

// ---- tests ----

// Root's session, another process' tracee, an untraced process: EPERM. The
// tracer itself may probe.
static void test_non_ptracer_eperm(void) {
  struct session s;
  CHECK(open_session(&s, 16) == 0, "open");
  pid_t plain = fork();
  if (plain == 0) {
    pause();
    _exit(0);
  }
  int r = add_at(&s, plain, NULL, (uintptr_t)probe_fn, 0, &regs_action, 1, NULL);
  kill(plain, SIGKILL);
  waitpid(plain, NULL, 0);
  CHECK(r == -EPERM, "untraced process: %s", strerror(-r));

  // A helper traces a child and reports its pid; we (root) are not its tracer.
  int report[2], done[2];
  CHECK(pipe(report) == 0 && pipe(done) == 0, "pipe");
  pid_t helper = fork();
  if (helper == 0) {
    struct child c = start_child(pause_forever, 0);
    struct session hs;
    int ok = open_session(&hs, 16) == 0 &&
             add_at(&hs, c.pid, NULL, (uintptr_t)probe_fn, 0, &regs_action, 1, NULL) == 0;
    int msg[2] = {c.pid, ok};
    char x;
    if (write(report[1], msg, sizeof msg) != sizeof msg || read(done[0], &x, 1) != 1)
      ok = 0;
    kill(c.pid, SIGKILL);
    wait_traced(c.pid);
    _exit(0);
  }
  int msg[2] = {0, 0};
  CHECK(read(report[0], msg, sizeof msg) == sizeof msg, "helper report");
  r = add_at(&s, msg[0], NULL, (uintptr_t)probe_fn, 0, &regs_action, 1, NULL);
  (void)!write(done[1], "d", 1);
  waitpid(helper, NULL, 0);
  close_session(&s);
  CHECK(msg[1] == 1, "the tracer itself could not probe its tracee");
  CHECK(r == -EPERM, "another process' tracee: %s", strerror(-r));
  OK();
}

// The setuid image: exit 0 only if it really runs privileged (so the race
// below is against a privileged image), after calling the probed function.
static int victim_main(void) {
  for (int i = 0; i < 200; i++)
    probe_fn(i);
  return geteuid() == 0 ? 0 : 20;
}

struct race_arg {
  struct session* s;
  pid_t pid;
  volatile int done;
  uint32_t ids[GDBTRACE_MAX_PROBES];
  int nids;
  int new_image_adds; // ADDs naming the setuid file that were accepted
};

// Until the tracee is gone: ADD on the image we trace (accepted while we are
// the tracer) and on the setuid image it is about to exec (never accepted:
// the old image does not map it, and once it does, we trace it no more).
static void* add_while_racing(void* p) {
  struct race_arg* a = p;
  while (!a->done) {
    struct gdbtrace_probe_add out;
    if (a->nids < 16 &&
        add_at(a->s, a->pid, NULL, (uintptr_t)probe_fn, 0, &regs_action, 1, &out) == 0)
      a->ids[a->nids++] = out.id;
    if (add_at(a->s, a->pid, "/tmp/gt_suid", (uintptr_t)probe_fn, 0, &regs_action, 1, &out) == 0) {
      a->ids[a->nids++] = out.id;
      a->new_image_adds++;
    }
  }
  return NULL;
}

static int stop_then_exec_victim(long unused) {
  (void)unused;
  execl("/tmp/gt_suid", "gt_suid", "victim", (char*)NULL);
  return 21;
}

// As nobody: trace a child, start ADDing on it from a second thread, detach,
// and let the child exec a setuid-root copy of this program. Every probe that
// was accepted belongs to the old image: none may fire in the new one.
static int setuid_race_as_nobody(int rounds) {
  struct session s;
  if (open_session(&s, 16))
    return 30;
  if (ioctl(s.fd, GDBTRACE_IOC_START))
    return 31;
  int privileged_runs = 0;
  for (int i = 0; i < rounds; i++) {
    struct child c = start_child(stop_then_exec_victim, 0);
    struct race_arg ra = {.s = &s, .pid = c.pid};
    pthread_t th;
    pthread_create(&th, NULL, add_while_racing, &ra);
    // Let some ADDs land while we are the tracer, then detach: ptrace(DETACH)
    // needs a ptrace stop, so stop it with SIGSTOP first.
    usleep(200 * (i % 8));
    kill(c.pid, SIGSTOP);
    int st;
    waitpid(c.pid, &st, 0);
    ptrace(PTRACE_DETACH, c.pid, NULL, (void*)(long)SIGCONT);
    if (write(c.go_fd, "g", 1) != 1)
      return 32;
    close(c.go_fd);
    waitpid(c.pid, &st, 0);
    ra.done = 1;
    pthread_join(th, NULL);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
      privileged_runs++;
    if (ra.new_image_adds)
      return 35; // a probe was bound to the setuid image
    for (int k = 0; k < ra.nids; k++) {
      struct gdbtrace_probe_status ps = probe_status(&s, ra.ids[k]);
      if (ps.hits || ps.frames)
        return 33; // a probe fired in the setuid image
    }
    ioctl(s.fd, GDBTRACE_IOC_REMOVE_ALL);
  }
  close_session(&s);
  return privileged_runs == rounds ? 0 : 34;
}

static int copy_file(const char* from, const char* to, mode_t mode) {
  int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0700);
  char buf[65536];
  ssize_t n;
  if (in < 0 || out < 0)
    return -1;
  while ((n = read(in, buf, sizeof buf)) > 0)
    if (write(out, buf, n) != n)
      return -1;
  close(in);
  close(out);
  return chmod(to, mode);
}

static void test_exec_setuid_race(void) {
  CHECK(copy_file("/proc/self/exe", "/tmp/gt_suid", 04755) == 0, "setuid copy");
  CHECK(chmod(GDBTRACE_DEVICE, 0666) == 0, "chmod");
  pid_t w = fork();
  if (w == 0) {
    if (setgid(65534) || setuid(65534))
      _exit(10);
    prctl(PR_SET_DUMPABLE, 1);
    _exit(setuid_race_as_nobody(40));
  }
  int st;
  waitpid(w, &st, 0);
  chmod(GDBTRACE_DEVICE, 0600);
  unlink("/tmp/gt_suid");
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
        "race worker status %d (33: probe fired in the setuid image; 34: victim not privileged; "
        "35: ADD on the setuid image accepted)",
        WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  OK();
}

struct mmap_loop {
  int fd, rounds;
  size_t len;
  int failed;
};

static void* mmap_loop(void* p) {
  struct mmap_loop* m = p;
  for (int i = 0; i < m->rounds; i++) {
    void* a = mmap(NULL, m->len, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0);
    if (a == MAP_FAILED) {
      m->failed++;
      continue;
    }
    munmap(a, m->len);
  }
  return NULL;
}

// ADD write-locks every mm mapping the probed file (ours too: the tracee is a
// fork of this program) while mmap() on the session runs under our mmap lock.
static void test_mmap_and_add_threads(void) {
  struct session s;
  CHECK(open_session(&s, 16) == 0, "open");
  struct child c = start_child(call_probe_fn, 10);
  struct mmap_loop m = {.fd = s.fd, .rounds = 3000, .len = 4096};
  pthread_t th;
  pthread_create(&th, NULL, mmap_loop, &m);
  int adds = 0, errs = 0;
  for (int i = 0; i < 300; i++) {
    if (add_at(&s, c.pid, NULL, (uintptr_t)probe_fn, 0, &regs_action, 1, NULL) == 0)
      adds++;
    else
      errs++;
    if (i % 16 == 15)
      ioctl(s.fd, GDBTRACE_IOC_REMOVE_ALL);
  }
  pthread_join(th, NULL);
  int rc = release_child(c);
  close_session(&s);
  CHECK(adds == 300 && errs == 0 && m.failed == 0, "adds %d errors %d mmap failures %d", adds, errs,
        m.failed);
  CHECK(rc == 0, "tracee exit %d", rc);
  OK();
}

static volatile uint64_t shared64;
static volatile uint32_t shared32;
static volatile int stop_reader;
static long torn_seen;

static void* read_for_tearing(void* unused) {
  (void)unused;
  while (!stop_reader) {
    uint64_t v = shared64;
    uint32_t w = shared32;
    if ((v != 0 && v != ~0ull) || (w != 0 && w != ~0u))
      torn_seen++;
  }
  return NULL;
}

static int store_with_reader(long n) {
  pthread_t th;
  // Write-fault the (copy-on-write after fork) page first: an emulated store
  // that faults is declined and single-stepped instead, as it should be.
  shared64 = 0;
  shared32 = 0;
  pthread_create(&th, NULL, read_for_tearing, NULL);
  for (long i = 0; i < n; i++) {
    store64(&shared64, (i & 1) ? ~0ull : 0);
    store32(&shared32, (i & 1) ? ~0u : 0);
  }
  stop_reader = 1;
  pthread_join(th, NULL);
  if (shared64 != ((n - 1) & 1 ? ~0ull : 0))
    return 8; // the last store did not land
  return torn_seen ? 9 : 0;
}

static void test_no_torn_emulated_stores(void) {
  enum { N = 4000 };
  struct session s;
  CHECK(open_session(&s, 16) == 0, "open");
  struct child c = start_child(store_with_reader, N);
  struct gdbtrace_probe_add a64, a32;
  const uint32_t emu = emu_flag();
  int r = add_at(&s, c.pid, NULL, (uintptr_t)store64, emu, NULL, 0, &a64);
  CHECK(r == 0, "add store64: %s", strerror(-r));
  r = add_at(&s, c.pid, NULL, (uintptr_t)store32, emu, NULL, 0, &a32);
  CHECK(r == 0, "add store32: %s", strerror(-r));
  CHECK(!emu || (a64.emu.op == GDBTRACE_EMU_STORE && a64.emu.width == 8), "store64 recipe op %u",
        a64.emu.op);
  CHECK(!emu || (a32.emu.op == GDBTRACE_EMU_STORE && a32.emu.width == 4), "store32 recipe op %u",
        a32.emu.op);
  CHECK(ioctl(s.fd, GDBTRACE_IOC_START) == 0, "start");
  int rc = release_child(c);
  struct gdbtrace_probe_status p64 = probe_status(&s, a64.id), p32 = probe_status(&s, a32.id);
  close_session(&s);
  CHECK(rc == 0, "tracee exit %d (9: a torn value was seen)", rc);
  const uint64_t want = emu ? N : 0;
  CHECK(p64.emulated == want && p32.emulated == want, "emulated %llu/%llu of %llu",
        (unsigned long long)p64.emulated, (unsigned long long)p32.emulated,
        (unsigned long long)want);
  OK();
}

static volatile uint64_t watched;

static int stop_then_store(long unused) {
  (void)unused;
  raise(SIGSTOP); // the tracer arms a hardware watchpoint on `watched` now
  store64(&shared64, 5);
  watched = 7; // traps: the watchpoint is live
  return shared64 == 5 ? 0 : 1;
}

// While a hardware watchpoint is armed (through ptrace, as gdb does), the
// module leaves a probed store to the CPU instead of emulating it, so a
// watchpoint on its target would trap. (The watched location here is not the
// store's own: the CPU single-stepping a store onto a watched address hangs
// QEMU's TCG, module or not -- a plain PTRACE_SINGLESTEP does it too -- so
// that end-to-end case cannot run in this harness.)
static void test_no_emulation_with_hw_watchpoint(void) {
  struct session s;
  CHECK(open_session(&s, 16) == 0, "open");
  struct child c = start_child(stop_then_store, 0);
  struct gdbtrace_probe_add a;
  int r = add_at(&s, c.pid, NULL, (uintptr_t)store64, emu_flag(), NULL, 0, &a);
  CHECK(r == 0, "add: %s", strerror(-r));
  CHECK(!emu_flag() || a.emu.op == GDBTRACE_EMU_STORE, "store64 not emulable (op %u)", a.emu.op);
  CHECK(ioctl(s.fd, GDBTRACE_IOC_START) == 0, "start");
  CHECK(write(c.go_fd, "g", 1) == 1, "go");
  int st;
  CHECK(waitpid(c.pid, &st, 0) == c.pid && WIFSTOPPED(st) && WSTOPSIG(st) == SIGSTOP, "no stop");
  const size_t dr = offsetof(struct user, u_debugreg);
  // DR0 = &watched; DR7: L0, break on write (01), 8 bytes (10).
  CHECK(ptrace(PTRACE_POKEUSER, c.pid, (void*)(dr + 0 * 8), (void*)&watched) == 0, "DR0");
  CHECK(ptrace(PTRACE_POKEUSER, c.pid, (void*)(dr + 7 * 8), (void*)0x90001ul) == 0, "DR7: %s",
        strerror(errno));
  ptrace(PTRACE_CONT, c.pid, NULL, NULL);
  CHECK(waitpid(c.pid, &st, 0) == c.pid, "wait");
  int trapped = WIFSTOPPED(st) && WSTOPSIG(st) == SIGTRAP;
  long dr6 = trapped ? ptrace(PTRACE_PEEKUSER, c.pid, (void*)(dr + 6 * 8), NULL) : 0;
  if (WIFSTOPPED(st)) {
    ptrace(PTRACE_POKEUSER, c.pid, (void*)(dr + 7 * 8), (void*)0ul);
    ptrace(PTRACE_CONT, c.pid, NULL, NULL);
  }
  int rc = WIFSTOPPED(st) ? wait_traced(c.pid) : -1;
  struct gdbtrace_probe_status ps = probe_status(&s, a.id);
  close_session(&s);
  CHECK(trapped && (dr6 & 1), "watchpoint did not fire (status %#x, dr6 %#lx)", st, dr6);
  CHECK(rc == 0, "tracee exit %d", rc);
  CHECK(ps.hits == 1 && ps.emulated == 0, "hits %llu emulated %llu", (unsigned long long)ps.hits,
        (unsigned long long)ps.emulated);
  OK();
}

// gt_test32 prints the address of its probed function, then waits for a byte
// on stdin and calls it; the function starts with `mov abs32,%ecx` (8b 0d),
// which as 64-bit code would be an emulable rip-relative load.
static void test_m32_never_emulated(void) {
  enum { N = 300 };
  if (access("/bin/gt_test32", X_OK) != 0) {
    printf("SKIP test_m32_never_emulated: no /bin/gt_test32\n");
    return;
  }
  int to[2], from[2];
  CHECK(pipe(to) == 0 && pipe(from) == 0, "pipe");
  pid_t pid = fork();
  if (pid == 0) {
    ptrace(PTRACE_TRACEME, 0, NULL, NULL);
    dup2(to[0], 0);
    dup2(from[1], 1);
    execl("/bin/gt_test32", "gt_test32", "300", (char*)NULL);
    _exit(127);
  }
  close(to[0]);
  close(from[1]);
  int st;
  CHECK(waitpid(pid, &st, 0) == pid, "wait");
  if (WIFEXITED(st) && WEXITSTATUS(st) == 127) {
    printf("SKIP test_m32_never_emulated: this kernel cannot run 32-bit programs\n");
    return;
  }
  CHECK(WIFSTOPPED(st), "no exec stop (status %#x)", st);
  ptrace(PTRACE_CONT, pid, NULL, NULL);
  char line[64] = {0};
  ssize_t n = read(from[0], line, sizeof line - 1);
  unsigned long addr = 0;
  if (n <= 0 || sscanf(line, "%lx", &addr) != 1) {
    kill(pid, SIGKILL);
    CHECK(0, "no address from gt_test32 (exit %d)", wait_traced(pid));
  }
  struct session s;
  CHECK(open_session(&s, 16) == 0, "open");
  struct gdbtrace_probe_add a;
  int r = add_at(&s, pid, "/bin/gt_test32", addr, emu_flag(), &regs_action, 1, &a);
  CHECK(r == 0, "add: %s", strerror(-r));
  CHECK(a.emu.op == GDBTRACE_EMU_NONE, "32-bit site got recipe op %u", a.emu.op);
  CHECK(ioctl(s.fd, GDBTRACE_IOC_START) == 0, "start");
  CHECK(write(to[1], "g", 1) == 1, "go");
  int rc = wait_traced(pid);
  struct gdbtrace_probe_status ps = probe_status(&s, a.id);
  close_session(&s);
  CHECK(rc == 0, "gt_test32 exit %d (its load ran wrong)", rc);
  CHECK(ps.emulated == 0 && ps.hits == N, "emulated %llu hits %llu",
        (unsigned long long)ps.emulated, (unsigned long long)ps.hits);
  OK();
}

// Rings are charged to the caller's memory cgroup, and one user holds at most
// 8 initialised sessions (the 9th INIT is EMFILE until one closes).
static int sessions_as_nobody(void) {
  struct session s[9];
  for (int i = 0; i < 8; i++)
    if (open_session(&s[i], 16))
      return 40 + i;
  if (open_session(&s[8], 16) != -EMFILE)
    return 50;
  close(s[8].fd);
  close_session(&s[0]);
  if (open_session(&s[8], 16))
    return 51;
  return 0;
}

static void test_session_cap_per_user(void) {
  CHECK(chmod(GDBTRACE_DEVICE, 0666) == 0, "chmod");
  pid_t w = fork();
  if (w == 0) {
    if (setgid(65534) || setuid(65534))
      _exit(10);
    _exit(sessions_as_nobody());
  }
  int st;
  waitpid(w, &st, 0);
  chmod(GDBTRACE_DEVICE, 0600);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
        "status %d (40+i: session i refused; 50: 9th accepted; 51: not freed on close)",
        WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  OK();
}

static void* call_probe_fn_thread(void* n) {
  call_probe_fn((long)n);
  return NULL;
}

enum { TSV_THREADS = 4 };

static int threads_call(long n) {
  pthread_t th[TSV_THREADS - 1];
  for (int i = 0; i < TSV_THREADS - 1; i++)
    pthread_create(&th[i], NULL, call_probe_fn_thread, (void*)n);
  call_probe_fn(n);
  for (int i = 0; i < TSV_THREADS - 1; i++)
    pthread_join(th[i], NULL);
  return 0;
}

// teval $x = $x + 1 as gdb compiles it: getv 0; const8 1; add; setv 0; pop; end.
// Several threads on the guest's CPUs: the module's compare-and-exchange
// (no lock across the program) must lose no increment.
static void test_threaded_tsv_increments(void) {
  enum { N = 3000 };
  static const uint8_t incr[] = {0x2c, 0, 0, 0x22, 1, 0x02, 0x2d, 0, 0, 0x29, 0x27};
  struct session s;
  CHECK(open_session(&s, 16) == 0, "open");
  struct gdbtrace_tsv tv = {.num = 0, .flags = GDBTRACE_TSV_DEFINE, .value = 0};
  CHECK(ioctl(s.fd, GDBTRACE_IOC_TSV_SET, &tv) == 0, "define tsv");
  struct child c = start_child(threads_call, N);
  struct gdbtrace_action x = {
      .kind = GDBTRACE_ACT_EXPR, .len = sizeof incr, .code = (uintptr_t)incr};
  int r = add_at(&s, c.pid, NULL, (uintptr_t)probe_fn, 0, &x, 1, NULL);
  CHECK(r == 0, "add: %s", strerror(-r));
  CHECK(ioctl(s.fd, GDBTRACE_IOC_START) == 0, "start");
  int rc = release_child(c);
  tv = (struct gdbtrace_tsv){.num = 0};
  CHECK(ioctl(s.fd, GDBTRACE_IOC_TSV_GET, &tv) == 0, "get tsv");
  close_session(&s);
  CHECK(rc == 0, "tracee exit %d", rc);
  CHECK(tv.value == TSV_THREADS * N, "$x = %lld after %d increments", (long long)tv.value,
        TSV_THREADS * N);
  OK();
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "victim") == 0)
    return victim_main();
  setvbuf(stdout, NULL, _IOLBF, 0);
  test_non_ptracer_eperm();
  test_exec_setuid_race();
  test_mmap_and_add_threads();
  test_no_torn_emulated_stores();
  test_no_emulation_with_hw_watchpoint();
  test_m32_never_emulated();
  test_threaded_tsv_increments();
  test_session_cap_per_user();
  printf("gt_safety: %d failure(s)\n", failures);
  return failures != 0;
}
