// ioctl-level tests of gdbtrace.ko, run inside the QEMU guest as root.
//
// The tracee is a fork of this program (same executable, so the probed
// function's address and file offset are known here): it makes its parent its
// ptracer (the module's rule: only a process's ptracer may probe it), waits on
// a pipe, then calls probe_me(i, 3*i) N times. Each test prints "ok <name>" or
// "FAIL <name>: why"; the exit status is the number of failures.
#include "gt_util.h"

enum { REGBLOCK = 816, OFF_RIP = 16 * 8, OFF_EFLAGS = 17 * 8 };

volatile long sink;
uint8_t big[8192] = {1};
volatile uint8_t marker[32] = "gdbtrace-marker-0123456789abcdef";

// emu_fn's first instruction (add $1,%rdi) has an emulation recipe; it returns
// arg + 1 when that instruction runs exactly once.
long emu_fn(long);
__asm__(
    ".text\n.globl emu_fn\n.type emu_fn,@function\nemu_fn:\n add $1,%rdi\n mov %rdi,%rax\n ret\n");

__attribute__((noinline)) long probe_me(long a, long b) {
  sink += a + b;
  marker[0] = (uint8_t)a;
  return sink;
}

// MANY_FNS small functions (each a `nop`, then `sink += 1`), named in base 4
// by the macros, and a table of them: the sites of test_many_probes.
#define MANY_FN(n)                                                                                 \
  __attribute__((noinline)) void many_##n(void) {                                                  \
    __asm__ volatile("nop");                                                                       \
    sink += 1;                                                                                     \
  }
#define MANY4(n, F) F(n##0) F(n##1) F(n##2) F(n##3)
#define MANY16(n, F) MANY4(n##0, F) MANY4(n##1, F) MANY4(n##2, F) MANY4(n##3, F)
#define MANY64(n, F) MANY16(n##0, F) MANY16(n##1, F) MANY16(n##2, F) MANY16(n##3, F)
#define MANY256(n, F) MANY64(n##0, F) MANY64(n##1, F) MANY64(n##2, F) MANY64(n##3, F)
#define MANY1024(n, F) MANY256(n##0, F) MANY256(n##1, F) MANY256(n##2, F) MANY256(n##3, F)
#define MANY4096(F) MANY1024(0, F) MANY1024(1, F) MANY1024(2, F) MANY1024(3, F)
MANY4096(MANY_FN)
#define MANY_PTR(n) many_##n,
static void (*const many_fns[])(void) = {MANY4096(MANY_PTR)};
enum { MANY_FNS = sizeof many_fns / sizeof many_fns[0] };

// ---- helpers ----

struct tracee {
  pid_t pid;
  int go_fd; // write a byte: start the loop
};

enum tracee_mode { T_PLAIN, T_FORK, T_EXEC, T_EMU, T_MANY };

static enum tracee_mode tracee_mode; // start_tracee's MODE, read by the forked child

// The tracee's loop of N calls, once its parent wrote the go byte (start_child).
static int tracee_body(long n) {
  if (tracee_mode == T_FORK) {
    pid_t child = fork();
    for (long i = 0; i < n; i++)
      probe_me(i, 3 * i);
    if (child == 0)
      _exit(sink == 0 ? 4 : 0);
    int st;
    waitpid(child, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 5;
  }
  if (tracee_mode == T_EMU) {
    for (long i = 0; i < n; i++)
      if (emu_fn(i) != i + 1)
        return 6;
  }
  if (tracee_mode == T_MANY) {
    long start = sink;
    for (long i = 0; i < n; i++)
      for (int k = 0; k < MANY_FNS; k++)
        many_fns[k]();
    return sink == start + n * MANY_FNS ? 0 : 8;
  }
  long before = sink;
  for (long i = 0; i < n; i++)
    probe_me(i, 3 * i);
  if (sink != before + 4 * (n * (n - 1) / 2))
    return 7; // every call's load/add/store happened once
  if (tracee_mode == T_EXEC)
    execl("/bin/busybox", "true", (char*)NULL);
  return 0;
}

static struct tracee start_tracee(long n, enum tracee_mode mode) {
  tracee_mode = mode;
  struct child c = start_child(tracee_body, n);
  return (struct tracee){c.pid, c.go_fd};
}

static int run_tracee(struct tracee t) {
  if (write(t.go_fd, "g", 1) != 1)
    return -1;
  close(t.go_fd);
  return wait_traced(t.pid);
}

static int add_probe(struct session* s, pid_t pid, uintptr_t addr, uint32_t tp,
                     struct gdbtrace_action* acts, uint32_t nacts, const uint8_t* cond,
                     uint32_t cond_len, uint64_t pass, uint32_t* id) {
  struct gdbtrace_probe_add a = {.pid = pid,
                                 .address = addr,
                                 .tp_number = tp,
                                 .nr_actions = nacts,
                                 .actions = (uintptr_t)acts,
                                 .cond = (uintptr_t)cond,
                                 .cond_len = cond_len,
                                 .pass_count = pass};
  int r = add_described(s, NULL, &a);
  if (r == 0 && id)
    *id = a.id;
  return r;
}

// Every frame in every ring, in ring order. Calls FN(frame, len, arg); frees the space.
typedef void (*frame_fn)(const uint8_t* f, uint32_t len, void* arg);
static long drain(struct session* s, frame_fn fn, void* arg) {
  long n = 0;
  for (uint32_t r = 0; r < s->init.nr_rings; r++) {
    struct gdbtrace_ring_header* h = (void*)(s->map + r * s->init.ring_stride);
    uint8_t* data = (uint8_t*)h + h->data_offset;
    uint64_t head = __atomic_load_n(&h->head, __ATOMIC_ACQUIRE), tail = h->tail;
    while (tail < head) {
      uint64_t off = tail % h->data_size;
      struct gdbtrace_record rec;
      memcpy(&rec, data + off, sizeof rec);
      if (rec.flags & GDBTRACE_REC_PAD) {
        tail += h->data_size - off;
        continue;
      }
      fn(data + off + sizeof rec, rec.len, arg);
      n++;
      tail += (sizeof rec + rec.len + 15) & ~15ull;
    }
    __atomic_store_n(&h->tail, tail, __ATOMIC_RELEASE);
  }
  return n;
}

// ---- frame checks ----

struct expect {
  long frames, bad;
  uint16_t tp;
  uintptr_t rip;
  int want_mem, want_stack, want_tsv;
  long seen_even, seen_odd;
  char why[200];
};

static uint64_t rd64(const uint8_t* p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

static void check_frame(const uint8_t* f, uint32_t len, void* arg) {
  struct expect* e = arg;
  e->frames++;
#define BAD(...)                                                                                   \
  do {                                                                                             \
    if (!e->bad++)                                                                                 \
      snprintf(e->why, sizeof e->why, __VA_ARGS__);                                                \
    return;                                                                                        \
  } while (0)
  uint16_t tp;
  uint32_t size;
  memcpy(&tp, f, 2);
  memcpy(&size, f + 2, 4);
  if (tp != e->tp || size + 6 != len)
    BAD("header tp %u size %u len %u", tp, size, len);
  const uint8_t *p = f + 6, *end = f + len;
  int regs = 0, mem = 0, stack = 0, tsv = 0;
  uint64_t rdi = 0, rsi = 0, rsp = 0;
  while (p < end) {
    if (*p == 'R') {
      if (end - p < 1 + REGBLOCK)
        BAD("short R");
      const uint8_t* r = p + 1;
      rdi = rd64(r + 5 * 8), rsi = rd64(r + 4 * 8), rsp = rd64(r + 7 * 8);
      if (rd64(r + OFF_RIP) != e->rip)
        BAD("rip %#lx want %#lx", (long)rd64(r + OFF_RIP), (long)e->rip);
      if (rsi != 3 * rdi)
        BAD("rsi %lu != 3*rdi %lu", (long)rsi, (long)rdi);
      regs++;
      p += 1 + REGBLOCK;
    } else if (*p == 'M') {
      uint64_t addr = rd64(p + 1);
      uint16_t n;
      memcpy(&n, p + 9, 2);
      if (addr == (uintptr_t)marker) {
        // marker[0] holds the previous call's a (i - 1) at the probe.
        if (n != sizeof marker || memcmp(p + 11 + 1, (const void*)(marker + 1), n - 1))
          BAD("marker bytes");
        mem++;
      } else if (addr == rsp && n == 8) {
        stack++; // trace_quick of the return address slot
      } else
        BAD("unexpected M %#lx/%u", (long)addr, n);
      p += 11 + n;
    } else if (*p == 'V') {
      tsv++;
      p += 13;
    } else
      BAD("block type %#x", *p);
  }
  if (p != end || !regs)
    BAD("frame layout");
  if (e->want_mem && !mem)
    BAD("no marker block");
  if (e->want_stack && !stack)
    BAD("no stack block");
  if (e->want_tsv && !tsv)
    BAD("no V block");
  if (rdi % 2)
    e->seen_odd++;
  else
    e->seen_even++;
}

static int read_tracee_byte(pid_t pid, uintptr_t addr, uint8_t* b) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/mem", pid);
  int fd = open(path, O_RDONLY);
  if (fd < 0)
    return -1;
  int r = pread(fd, b, 1, (off_t)addr) == 1 ? 0 : -1;
  close(fd);
  return r;
}

// bytecode: reg rsp; trace_quick 8; end   (collects the return address slot)
static const uint8_t X_STACK[] = {0x26, 0x00, 7 /* rsp */, 0x0d, 8, 0x27};

// ---- tests ----

static void test_basic_frames(void) {
  struct session s;
  const long N = 2000;
  CHECK(open_session(&s, 22) == 0, "open/init/mmap: %s", strerror(errno));
  struct tracee t = start_tracee(N, T_PLAIN);
  struct gdbtrace_action acts[3] = {
      {.kind = GDBTRACE_ACT_REGS},
      {.kind = GDBTRACE_ACT_MEM,
       .basereg = -1,
       .offset = (int64_t)(uintptr_t)marker,
       .len = sizeof marker},
      {.kind = GDBTRACE_ACT_EXPR, .len = sizeof X_STACK, .code = (uintptr_t)X_STACK},
  };
  uint32_t id;
  int r = add_probe(&s, t.pid, (uintptr_t)probe_me, 7, acts, 3, NULL, 0, 0, &id);
  CHECK(r == 0, "add: %s", strerror(-r));
  uint8_t b = 0;
  CHECK(read_tracee_byte(t.pid, (uintptr_t)probe_me, &b) == 0 && b == 0xcc,
        "no int3 in tracee (%#x)", b);
  CHECK(ioctl(s.fd, GDBTRACE_IOC_START) == 0, "start");
  CHECK(run_tracee(t) == 0, "tracee failed");
  struct expect e = {.tp = 7, .rip = (uintptr_t)probe_me, .want_mem = 1, .want_stack = 1};
  struct pollfd pfd = {s.fd, POLLIN, 0};
  CHECK(poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN), "poll not readable");
  drain(&s, check_frame, &e);
  CHECK(!e.bad, "%ld bad frames: %s", e.bad, e.why);
  CHECK(e.frames == N, "frames %ld want %ld", e.frames, N);
  struct gdbtrace_probe_status st = probe_status(&s, id);
  CHECK(st.hits == (uint64_t)N && st.frames == (uint64_t)N && st.drops == 0 && st.errors == 0,
        "status hits %llu frames %llu drops %llu errors %llu", st.hits, st.frames, st.drops,
        st.errors);
  close_session(&s);
  OK();
}

static void test_condition_passcount_tsv(void) {
  struct session s;
  CHECK(open_session(&s, 20) == 0, "open");
  struct gdbtrace_tsv tv = {.num = 3, .flags = GDBTRACE_TSV_DEFINE, .value = 100};
  CHECK(ioctl(s.fd, GDBTRACE_IOC_TSV_SET, &tv) == 0, "tsv set");
  // condition: (rdi & 1) == 0
  static const uint8_t cond[] = {0x26, 0, 5, 0x22, 1, 0x0f, 0x22, 0, 0x13, 0x27};
  // action: getv 3; const8 1; add; setv 3; pop; tracev 3; end
  static const uint8_t incr[] = {0x2c, 0, 3, 0x22, 1, 0x02, 0x2d, 0, 3, 0x29, 0x2e, 0, 3, 0x27};
  struct gdbtrace_action acts[2] = {
      {.kind = GDBTRACE_ACT_REGS},
      {.kind = GDBTRACE_ACT_EXPR, .len = sizeof incr, .code = (uintptr_t)incr}};
  struct tracee t = start_tracee(1000, T_PLAIN);
  uint32_t id;
  int r = add_probe(&s, t.pid, (uintptr_t)probe_me, 2, acts, 2, cond, sizeof cond, 0, &id);
  CHECK(r == 0, "add: %s", strerror(-r));
  CHECK(ioctl(s.fd, GDBTRACE_IOC_START) == 0, "start");
  CHECK(run_tracee(t) == 0, "tracee");
  struct expect e = {.tp = 2, .rip = (uintptr_t)probe_me, .want_tsv = 1};
  drain(&s, check_frame, &e);
  CHECK(!e.bad, "%s", e.why);
  CHECK(e.seen_even == 500 && e.seen_odd == 0, "even %ld odd %ld", e.seen_even, e.seen_odd);
  struct gdbtrace_tsv g = {.num = 3};
  CHECK(ioctl(s.fd, GDBTRACE_IOC_TSV_GET, &g) == 0 && g.value == 600, "tsv %lld",
        (long long)g.value);
  close_session(&s);

  // pass count 10: exactly 10 frames, session stopped for tracepoint 4
  CHECK(open_session(&s, 20) == 0, "open");
  t = start_tracee(1000, T_PLAIN);
  r = add_probe(&s, t.pid, (uintptr_t)probe_me, 4, acts, 1, NULL, 0, 10, &id);
  CHECK(r == 0, "add: %s", strerror(-r));
  CHECK(ioctl(s.fd, GDBTRACE_IOC_START) == 0, "start");
  CHECK(run_tracee(t) == 0, "tracee");
  struct expect e2 = {.tp = 4, .rip = (uintptr_t)probe_me};
  drain(&s, check_frame, &e2);
  struct gdbtrace_session_status ss;
  CHECK(ioctl(s.fd, GDBTRACE_IOC_STATUS, &ss) == 0, "status");
  CHECK(e2.frames == 10 && !e2.bad, "pass count frames %ld", e2.frames);
  CHECK(!ss.running && ss.stop_reason == GDBTRACE_STOP_PASSCOUNT && ss.stop_tp == 4,
        "stop %u/%u/%u", ss.running, ss.stop_reason, ss.stop_tp);
  close_session(&s);
  OK();
}

static void count_frame(const uint8_t* f, uint32_t len, void* arg) {
  struct expect* e = arg;
  e->frames++;
  uint32_t size;
  memcpy(&size, f + 2, 4);
  if (size + 6 != len || f[6] != 'M')
    e->bad++;
}

static void test_overflow_counts_drops(void) {
  struct session s;
  CHECK(open_session(&s, 16) == 0, "open"); // 64 KiB per ring
  struct gdbtrace_action act = {
      .kind = GDBTRACE_ACT_MEM, .basereg = -1, .offset = (int64_t)(uintptr_t)big, .len = 4000};
  struct tracee t = start_tracee(500, T_PLAIN);
  uint32_t id;
  int r = add_probe(&s, t.pid, (uintptr_t)probe_me, 9, &act, 1, NULL, 0, 0, &id);
  CHECK(r == 0, "add: %s", strerror(-r));
  CHECK(ioctl(s.fd, GDBTRACE_IOC_START) == 0, "start");
  CHECK(run_tracee(t) == 0, "tracee");
  struct expect e = {0};
  drain(&s, count_frame, &e);
  struct gdbtrace_probe_status st = probe_status(&s, id);
  struct gdbtrace_session_status ss;
  ioctl(s.fd, GDBTRACE_IOC_STATUS, &ss);
  CHECK(!e.bad, "torn frame");
  CHECK(st.hits == 500 && st.frames == (uint64_t)e.frames && st.drops == 500 - st.frames &&
            ss.drops == st.drops,
        "hits %llu frames %llu/%ld drops %llu/%llu", st.hits, st.frames, e.frames, st.drops,
        ss.drops);
  CHECK(e.frames > 0 && e.frames < 500, "frames %ld", e.frames);
  close_session(&s);
  OK();
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

struct many_expect {
  long frames, bad;
  uint32_t per_tp[MANY_FNS + 1];
};

static void count_many_frame(const uint8_t* f, uint32_t len, void* arg) {
  struct many_expect* e = arg;
  uint16_t tp;
  memcpy(&tp, f, 2);
  e->frames++;
  if (tp >= 1 && tp <= MANY_FNS && len > 6 && f[6] == 'M')
    e->per_tp[tp]++;
  else
    e->bad++;
}

// More probes than the module once held (256 per session): one on each of
// MANY_FNS functions, each hit ROUNDS times, every hit counted and framed. Prints
// how long adding and removing them took (the module's part of a tstart/tstop).
static void test_many_probes(void) {
  enum { ROUNDS = 2 };
  struct session s;
  CHECK(open_session(&s, 20) == 0, "open"); // 1 MiB per ring: every frame fits
  struct gdbtrace_action act = {
      .kind = GDBTRACE_ACT_MEM, .basereg = -1, .offset = (int64_t)(uintptr_t)&sink, .len = 8};
  struct tracee t = start_tracee(ROUNDS, T_MANY);
  static uint32_t ids[MANY_FNS];
  double start = now_ms();
  int added = 0, r = 0;
  for (; added < MANY_FNS; added++) {
    r = add_probe(&s, t.pid, (uintptr_t)many_fns[added], added + 1, &act, 1, NULL, 0, 0,
                  &ids[added]);
    if (r)
      break;
  }
  double added_ms = now_ms() - start;
  CHECK(added == MANY_FNS, "probe %d of %d: %s", added + 1, MANY_FNS, strerror(-r));
  CHECK(ioctl(s.fd, GDBTRACE_IOC_START) == 0, "start");
  CHECK(run_tracee(t) == 0, "tracee");
  static struct many_expect e;
  memset(&e, 0, sizeof e);
  drain(&s, count_many_frame, &e);
  int wrong = 0;
  for (int k = 0; k < MANY_FNS; k++) {
    struct gdbtrace_probe_status st = probe_status(&s, ids[k]);
    if (st.hits != ROUNDS || st.frames != ROUNDS || e.per_tp[k + 1] != ROUNDS)
      wrong++;
  }
  CHECK(!e.bad && e.frames == (long)ROUNDS * MANY_FNS, "frames %ld (bad %ld)", e.frames, e.bad);
  CHECK(wrong == 0, "%d probes without exactly %d hits and frames", wrong, ROUNDS);
  start = now_ms();
  CHECK(ioctl(s.fd, GDBTRACE_IOC_REMOVE_ALL) == 0, "remove all");
  printf("gt_test many probes: %d added in %.0f ms, removed in %.0f ms\n", MANY_FNS, added_ms,
         now_ms() - start);
  close_session(&s);
  OK();
}

static void test_close_removes_probes(void) {
  struct session s;
  CHECK(open_session(&s, 16) == 0, "open");
  struct tracee t = start_tracee(100, T_PLAIN);
  struct gdbtrace_action act = {.kind = GDBTRACE_ACT_REGS};
  uint8_t orig = *(volatile uint8_t*)(uintptr_t)probe_me, b = 0;
  int r = add_probe(&s, t.pid, (uintptr_t)probe_me, 1, &act, 1, NULL, 0, 0, NULL);
  CHECK(r == 0, "add: %s", strerror(-r));
  CHECK(read_tracee_byte(t.pid, (uintptr_t)probe_me, &b) == 0 && b == 0xcc, "int3 missing");
  close_session(&s);
  CHECK(read_tracee_byte(t.pid, (uintptr_t)probe_me, &b) == 0 && b == orig,
        "text not restored: %#x", b);
  CHECK(run_tracee(t) == 0, "tracee after close");
  OK();
}

// Two sessions on the same instruction in two processes: closing one restores
// only its process; the other keeps its breakpoint until it closes too.
static void test_two_sessions_same_site(void) {
  struct session a, b, dead;
  // A third session whose tracee has already exited stays open throughout.
  CHECK(open_session(&dead, 16) == 0, "open dead");
  struct tracee td = start_tracee(3, T_PLAIN);
  struct gdbtrace_action act0 = {.kind = GDBTRACE_ACT_REGS};
  CHECK(add_probe(&dead, td.pid, (uintptr_t)probe_me, 1, &act0, 1, NULL, 0, 0, NULL) == 0,
        "add dead");
  CHECK(ioctl(dead.fd, GDBTRACE_IOC_START) == 0 && run_tracee(td) == 0, "dead tracee");
  CHECK(open_session(&a, 16) == 0, "open a");
  struct tracee ta = start_tracee(10, T_PLAIN);
  CHECK(open_session(&b, 16) == 0, "open b");
  struct tracee tb = start_tracee(10, T_PLAIN);
  struct gdbtrace_action act = {.kind = GDBTRACE_ACT_REGS};
  uint8_t orig = *(volatile uint8_t*)(uintptr_t)probe_me, x = 0, y = 0;
  CHECK(add_probe(&a, ta.pid, (uintptr_t)probe_me, 1, &act, 1, NULL, 0, 0, NULL) == 0, "add a");
  CHECK(add_probe(&b, tb.pid, (uintptr_t)probe_me, 1, &act, 1, NULL, 0, 0, NULL) == 0, "add b");
  read_tracee_byte(ta.pid, (uintptr_t)probe_me, &x);
  read_tracee_byte(tb.pid, (uintptr_t)probe_me, &y);
  CHECK(x == 0xcc && y == 0xcc, "int3 missing %#x %#x", x, y);
  close_session(&b);
  read_tracee_byte(ta.pid, (uintptr_t)probe_me, &x);
  read_tracee_byte(tb.pid, (uintptr_t)probe_me, &y);
  CHECK(x == 0xcc && y == orig, "after closing b: a %#x b %#x", x, y);
  close_session(&a);
  read_tracee_byte(ta.pid, (uintptr_t)probe_me, &x);
  CHECK(x == orig, "after closing a: %#x", x);
  CHECK(run_tracee(ta) == 0 && run_tracee(tb) == 0, "tracees");
  close_session(&dead);
  OK();
}

static void test_fork_exec_exit(void) {
  struct session s;
  CHECK(open_session(&s, 20) == 0, "open");
  struct gdbtrace_action act = {.kind = GDBTRACE_ACT_REGS};
  // fork: the child inherits the breakpoint page but is not the target: no frames from it.
  struct tracee t = start_tracee(300, T_FORK);
  uint32_t id;
  int r = add_probe(&s, t.pid, (uintptr_t)probe_me, 5, &act, 1, NULL, 0, 0, &id);
  CHECK(r == 0, "add: %s", strerror(-r));
  CHECK(ioctl(s.fd, GDBTRACE_IOC_START) == 0, "start");
  CHECK(run_tracee(t) == 0, "forking tracee failed");
  struct expect e = {.tp = 5, .rip = (uintptr_t)probe_me};
  drain(&s, check_frame, &e);
  CHECK(!e.bad && e.frames == 300, "fork: frames %ld (%s)", e.frames, e.why);
  // exec and exit while probed
  t = start_tracee(50, T_EXEC);
  r = add_probe(&s, t.pid, (uintptr_t)probe_me, 6, &act, 1, NULL, 0, 0, &id);
  CHECK(r == 0, "add: %s", strerror(-r));
  CHECK(run_tracee(t) == 0, "exec tracee failed");
  struct gdbtrace_probe_status st = probe_status(&s, id);
  CHECK(st.hits == 50, "exec hits %llu", st.hits);
  // a probe on an exited process is refused
  r = add_probe(&s, t.pid, (uintptr_t)probe_me, 6, &act, 1, NULL, 0, 0, &id);
  CHECK(r == -ESRCH, "probe on reaped pid: %d", r);
  close_session(&s);
  OK();
}

// A program that loops forever is valid bytecode: the step budget ends each run.
static void test_runaway_bytecode(void) {
  struct session s;
  CHECK(open_session(&s, 16) == 0, "open");
  static const uint8_t loop[] = {0x21, 0, 0}; // goto 0
  struct gdbtrace_action acts[2] = {
      {.kind = GDBTRACE_ACT_REGS},
      {.kind = GDBTRACE_ACT_EXPR, .len = sizeof loop, .code = (uintptr_t)loop}};
  struct tracee t = start_tracee(5, T_PLAIN);
  uint32_t id;
  int r = add_probe(&s, t.pid, (uintptr_t)probe_me, 3, acts, 2, NULL, 0, 0, &id);
  CHECK(r == 0, "add: %s", strerror(-r));
  CHECK(ioctl(s.fd, GDBTRACE_IOC_START) == 0, "start");
  CHECK(run_tracee(t) == 0, "tracee");
  struct gdbtrace_probe_status st = probe_status(&s, id);
  CHECK(st.hits == 5 && st.frames == 5 && st.errors == 5, "hits %llu frames %llu errors %llu",
        st.hits, st.frames, st.errors);
  close_session(&s);
  OK();
}

// ADD with GDBTRACE_PROBE_EMULATE; *EMU gets the recipe the module reports.
static int add_probe_emu(struct session* s, pid_t pid, uintptr_t addr, struct gdbtrace_emu* emu,
                         uint32_t tp, struct gdbtrace_action* acts, uint32_t nacts, uint32_t* id) {
  struct gdbtrace_probe_add a = {.pid = pid,
                                 .address = addr,
                                 .tp_number = tp,
                                 .nr_actions = nacts,
                                 .actions = (uintptr_t)acts,
                                 .flags = GDBTRACE_PROBE_EMULATE};
  int r = add_described(s, NULL, &a);
  if (r)
    return r;
  if (id)
    *id = a.id;
  *emu = a.emu;
  return 0;
}

// Where the module's self-test turned emulation off (the kernel would
// single-step an emulated instruction again), an emulating ADD is refused and
// a plain probe at the same site leaves the instruction to the kernel: it
// runs once.
static void test_emulation_off(void) {
  struct session s;
  CHECK(open_session(&s, 16) == 0, "open");
  struct tracee t = start_tracee(50, T_EMU);
  struct gdbtrace_action act = {.kind = GDBTRACE_ACT_REGS};
  struct gdbtrace_emu got;
  int r = add_probe_emu(&s, t.pid, (uintptr_t)emu_fn, &got, 1, &act, 1, NULL);
  CHECK(r == -EOPNOTSUPP, "emulating ADD without FEAT_EMULATE: %s", strerror(-r));
  uint32_t id;
  r = add_probe(&s, t.pid, (uintptr_t)emu_fn, 1, &act, 1, NULL, 0, 0, &id);
  CHECK(r == 0, "add: %s", strerror(-r));
  CHECK(ioctl(s.fd, GDBTRACE_IOC_START) == 0, "start");
  int rc = run_tracee(t);
  struct gdbtrace_probe_status st = probe_status(&s, id);
  close_session(&s);
  CHECK(rc == 0, "tracee exit %d (6: the instruction ran twice)", rc);
  CHECK(st.frames == 50 && st.emulated == 0, "frames %llu emulated %llu",
        (unsigned long long)st.frames, (unsigned long long)st.emulated);
  printf("ok test_emulation (emulation off: refused, single-stepped once)\n");
}

// Emulated sites: the module decodes the probed instruction and reports its
// recipe, the kernel must skip its single-step (else the instruction runs
// twice and the tracee notices), frames stay correct, and a caller cannot
// hand the module a recipe.
static void test_emulation(void) {
  if (!emu_flag()) {
    test_emulation_off();
    return;
  }
  struct session s;
  CHECK(open_session(&s, 22) == 0, "open");
  const uint8_t* fb = (const uint8_t*)(uintptr_t)emu_fn;
  CHECK(fb[0] == 0x48 && fb[1] == 0x83 && fb[2] == 0xc7 && fb[3] == 0x01, "emu_fn bytes");
  struct gdbtrace_emu add1 = {
      .op = GDBTRACE_EMU_ADD_IMM, .insn_len = 4, .dst = 5, .width = 8, .imm = 1};
  memcpy(add1.insn, fb, 4);
  // probe_me starts with mov disp32(%rip),%rax (compiled -O2): a load from sink.
  const uint8_t* pb = (const uint8_t*)(uintptr_t)probe_me;
  CHECK(pb[0] == 0x48 && pb[1] == 0x8b && pb[2] == 0x05, "probe_me does not start with a rip load");
  struct gdbtrace_emu load = {.op = GDBTRACE_EMU_LOAD_RIP, .insn_len = 7, .dst = 0, .width = 8};
  int32_t disp;
  memcpy(&disp, pb + 3, 4);
  load.imm = disp;
  memcpy(load.insn, pb, 7);

  struct tracee t = start_tracee(500, T_EMU);
  struct gdbtrace_action acts[2] = {{.kind = GDBTRACE_ACT_REGS},
                                    {.kind = GDBTRACE_ACT_MEM,
                                     .basereg = -1,
                                     .offset = (int64_t)(uintptr_t)marker,
                                     .len = sizeof marker}};
  struct gdbtrace_probe_add lie = {.pid = t.pid, .tp_number = 1, .emu = add1};
  CHECK(expect_errno(s.fd, GDBTRACE_IOC_ADD, &lie, EINVAL), "caller's recipe accepted");
  uint32_t id_add, id_load;
  struct gdbtrace_emu got;
  int r = add_probe_emu(&s, t.pid, (uintptr_t)emu_fn, &got, 1, acts, 1, &id_add);
  CHECK(r == 0, "add emu_fn: %s", strerror(-r));
  CHECK(memcmp(&got, &add1, sizeof got) == 0, "emu_fn recipe op %u len %u", got.op, got.insn_len);
  r = add_probe_emu(&s, t.pid, (uintptr_t)probe_me, &got, 8, acts, 2, &id_load);
  CHECK(r == 0, "add probe_me: %s", strerror(-r));
  CHECK(memcmp(&got, &load, sizeof got) == 0, "probe_me recipe op %u len %u", got.op, got.insn_len);
  // A second probe at the same site: the instruction must still run once and
  // both probes must see the registers of the probe point.
  uint32_t id_second;
  r = add_probe_emu(&s, t.pid, (uintptr_t)probe_me, &got, 9, acts, 1, &id_second);
  CHECK(r == 0, "add second probe_me: %s", strerror(-r));
  CHECK(got.op == GDBTRACE_EMU_NONE, "second probe at a site emulates too");
  CHECK(ioctl(s.fd, GDBTRACE_IOC_START) == 0, "start");
  int rc = run_tracee(t);
  CHECK(rc == 0, "tracee saw wrong results (exit %d): kernel does not skip the single-step?", rc);
  struct gdbtrace_probe_status a = probe_status(&s, id_add), b = probe_status(&s, id_load);
  CHECK(a.emulated == 500 && a.frames == 500, "emu_fn emulated %llu frames %llu", a.emulated,
        a.frames);
  CHECK(b.emulated == 500 && b.frames == 500 && (b.flags & GDBTRACE_PST_EMULATING),
        "probe_me emulated %llu", b.emulated);
  struct expect e = {.tp = 8, .rip = (uintptr_t)probe_me, .want_mem = 1};
  struct expect e9 = {.tp = 9, .rip = (uintptr_t)probe_me};
  long frames8 = 0;
  // Frames of both probes are interleaved: check the tracepoint-8 ones.
  for (uint32_t rr = 0; rr < s.init.nr_rings; rr++) {
    struct gdbtrace_ring_header* h = (void*)(s.map + rr * s.init.ring_stride);
    uint8_t* data = (uint8_t*)h + h->data_offset;
    uint64_t head = __atomic_load_n(&h->head, __ATOMIC_ACQUIRE), tail = h->tail;
    while (tail < head) {
      uint64_t off = tail % h->data_size;
      struct gdbtrace_record rec;
      memcpy(&rec, data + off, sizeof rec);
      if (rec.flags & GDBTRACE_REC_PAD) {
        tail += h->data_size - off;
        continue;
      }
      uint16_t tp;
      memcpy(&tp, data + off + sizeof rec, 2);
      if (tp == 8) {
        check_frame(data + off + sizeof rec, rec.len, &e);
        frames8++;
      }
      if (tp == 9)
        check_frame(data + off + sizeof rec, rec.len, &e9);
      tail += (sizeof rec + rec.len + 15) & ~15ull;
    }
    h->tail = tail;
  }
  CHECK(!e.bad && frames8 == 500, "probe_me frames %ld: %s", frames8, e.why);
  CHECK(!e9.bad && e9.frames == 500, "second probe frames %ld: %s", e9.frames, e9.why);
  close_session(&s);
  OK();
}

static void test_hostile_ioctls(void) {
  int fd = open(GDBTRACE_DEVICE, O_RDWR);
  CHECK(fd >= 0, "open");
  struct gdbtrace_probe_add a = {0};
  CHECK(expect_errno(fd, GDBTRACE_IOC_ADD, &a, ENOTCONN), "add before init");
  CHECK(expect_errno(fd, GDBTRACE_IOC_INIT, NULL, EFAULT), "init NULL");
  struct gdbtrace_init in = {.version = 99, .regblock_size = REGBLOCK, .ring_shift = 16};
  CHECK(expect_errno(fd, GDBTRACE_IOC_INIT, &in, EPROTO), "bad version");
  in.version = GDBTRACE_UAPI_VERSION;
  in.regblock_size = 17;
  CHECK(expect_errno(fd, GDBTRACE_IOC_INIT, &in, EINVAL), "bad regblock");
  in.regblock_size = REGBLOCK;
  in.ring_shift = 40;
  CHECK(expect_errno(fd, GDBTRACE_IOC_INIT, &in, EINVAL), "huge ring");
  in.ring_shift = 16;
  CHECK(ioctl(fd, GDBTRACE_IOC_INIT, &in) == 0, "init");
  CHECK(expect_errno(fd, GDBTRACE_IOC_INIT, &in, EBUSY), "second init");
  CHECK(expect_errno(fd, _IO(GDBTRACE_IOC_MAGIC, 77), NULL, ENOTTY), "unknown ioctl");
  CHECK(expect_errno(fd, _IO('T', 1), NULL, ENOTTY), "foreign ioctl");
  void* m = mmap(NULL, in.mmap_size + 65536, PROT_READ, MAP_SHARED, fd, 0);
  CHECK(m == MAP_FAILED, "oversized mmap accepted");
  m = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0);
  CHECK(m == MAP_FAILED, "exec mmap accepted");
  m = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 4096);
  CHECK(m == MAP_FAILED, "offset mmap accepted");

  struct tracee t = start_tracee(10, T_PLAIN);
  int exe = open("/proc/self/exe", O_RDONLY);
  struct gdbtrace_action act = {.kind = GDBTRACE_ACT_REGS};
  struct gdbtrace_probe_add good = {.pid = t.pid,
                                    .fd = exe,
                                    .offset = file_offset_of(t.pid, (uintptr_t)probe_me),
                                    .address = (uintptr_t)probe_me,
                                    .tp_number = 1,
                                    .nr_actions = 1,
                                    .actions = (uintptr_t)&act};
  a = good;
  a.pid = 0;
  CHECK(expect_errno(fd, GDBTRACE_IOC_ADD, &a, EINVAL), "pid 0");
  a = good;
  a.pid = 999999;
  CHECK(expect_errno(fd, GDBTRACE_IOC_ADD, &a, ESRCH), "no such pid");
  a = good;
  a.fd = 9999;
  CHECK(expect_errno(fd, GDBTRACE_IOC_ADD, &a, EBADF), "bad fd");
  a = good;
  a.fd = fd;
  CHECK(expect_errno(fd, GDBTRACE_IOC_ADD, &a, EINVAL), "device fd as file");
  // The file and offset must be what the tracee maps executable at the address.
  int other = open("/bin/busybox", O_RDONLY);
  a = good;
  a.fd = other;
  CHECK(expect_errno(fd, GDBTRACE_IOC_ADD, &a, ESTALE), "another file accepted");
  close(other);
  a = good;
  a.offset += 1;
  CHECK(expect_errno(fd, GDBTRACE_IOC_ADD, &a, ESTALE), "wrong offset accepted");
  a = good;
  a.address = (uintptr_t)big; // data, not code
  a.offset = file_offset_of(t.pid, (uintptr_t)big);
  CHECK(expect_errno(fd, GDBTRACE_IOC_ADD, &a, ESTALE), "non-executable mapping accepted");
  a = good;
  a.offset = 1ull << 40;
  CHECK(expect_errno(fd, GDBTRACE_IOC_ADD, &a, ESTALE), "offset past EOF accepted");
  a = good;
  a.tp_number = 70000;
  CHECK(expect_errno(fd, GDBTRACE_IOC_ADD, &a, EINVAL), "tp > u16");
  a = good;
  a.nr_actions = 100000;
  CHECK(expect_errno(fd, GDBTRACE_IOC_ADD, &a, E2BIG), "too many actions");
  a = good;
  a.actions = 16;
  CHECK(expect_errno(fd, GDBTRACE_IOC_ADD, &a, EFAULT), "bad actions pointer");
  a = good;
  a.flags = 0x80;
  CHECK(expect_errno(fd, GDBTRACE_IOC_ADD, &a, EINVAL), "unknown flags");
  struct gdbtrace_action bad = {.kind = 'Q'};
  a = good;
  a.actions = (uintptr_t)&bad;
  CHECK(expect_errno(fd, GDBTRACE_IOC_ADD, &a, EINVAL), "bad action kind");
  bad = (struct gdbtrace_action){.kind = GDBTRACE_ACT_MEM, .basereg = -1, .len = 1 << 20};
  CHECK(expect_errno(fd, GDBTRACE_IOC_ADD, &a, EINVAL), "huge M");
  static const uint8_t junk[] = {0xff, 0xff, 0x27};
  bad = (struct gdbtrace_action){
      .kind = GDBTRACE_ACT_EXPR, .len = sizeof junk, .code = (uintptr_t)junk};
  CHECK(expect_errno(fd, GDBTRACE_IOC_ADD, &a, EINVAL), "unknown opcode accepted");
  static const uint8_t noend[] = {0x22, 1};
  bad.code = (uintptr_t)noend, bad.len = sizeof noend;
  CHECK(expect_errno(fd, GDBTRACE_IOC_ADD, &a, EINVAL), "no end accepted");
  bad.len = 100000;
  CHECK(expect_errno(fd, GDBTRACE_IOC_ADD, &a, EINVAL), "huge code");
  static const uint8_t badtsv[] = {0x2c, 0, 42, 0x27};
  bad.code = (uintptr_t)badtsv, bad.len = sizeof badtsv;
  CHECK(expect_errno(fd, GDBTRACE_IOC_ADD, &a, EINVAL), "undefined tsv accepted");
  static const uint8_t tracecond[] = {0x26, 0, 7, 0x0d, 8, 0x27};
  a = good;
  a.cond = (uintptr_t)tracecond;
  a.cond_len = sizeof tracecond;
  CHECK(expect_errno(fd, GDBTRACE_IOC_ADD, &a, EINVAL), "trace op in condition accepted");
  a = good;
  a.emu.op = 200;
  CHECK(expect_errno(fd, GDBTRACE_IOC_ADD, &a, EINVAL), "caller's emulation recipe accepted");
  struct gdbtrace_tsv tv = {.num = 1u << 30, .flags = GDBTRACE_TSV_DEFINE};
  CHECK(expect_errno(fd, GDBTRACE_IOC_TSV_SET, &tv, EINVAL), "tsv number");
  tv = (struct gdbtrace_tsv){.num = 5};
  CHECK(expect_errno(fd, GDBTRACE_IOC_TSV_GET, &tv, ENOENT), "undefined tsv get");
  struct gdbtrace_probe_enable en = {.id = 12345, .enable = 1};
  CHECK(expect_errno(fd, GDBTRACE_IOC_ENABLE, &en, ENOENT), "enable unknown id");

  // Random add requests: must fail or succeed, never crash. Valid fd/pid half the time.
  srand(12345);
  long accepted = 0;
  for (int i = 0; i < 3000; i++) {
    uint8_t buf[sizeof a];
    for (size_t k = 0; k < sizeof buf; k++)
      buf[k] = rand();
    memcpy(&a, buf, sizeof a);
    if (i & 1)
      a.pid = t.pid, a.fd = exe, a.id = 0, a.reserved = 0, a.flags &= 3;
    if (i & 2)
      a.actions = (uintptr_t)&act, a.nr_actions = 1;
    if (i & 4)
      a.emu = (struct gdbtrace_emu){0};
    if (i & 8)
      a.cond = 0, a.cond_len = 0;
    if (ioctl(fd, GDBTRACE_IOC_ADD, &a) == 0)
      accepted++;
  }
  CHECK(accepted < 3000, "random requests all accepted");
  close(exe);
  close(fd); // removes whatever random probes landed
  CHECK(run_tracee(t) == 0, "tracee after hostile session");
  OK();
}

static void test_unprivileged(void) {
  pid_t root_victim = fork();
  if (root_victim == 0) {
    pause();
    _exit(0);
  }
  int st;
  pid_t c = fork();
  if (c == 0) {
    if (setgid(65534) || setuid(65534))
      _exit(10);
    // 0600 root device: an ordinary user cannot even open it.
    if (open(GDBTRACE_DEVICE, O_RDWR) >= 0 || errno != EACCES)
      _exit(11);
    _exit(0);
  }
  waitpid(c, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "open as nobody: status %d", WEXITSTATUS(st));

  // With the device opened up, the ptrace check is what stops them.
  CHECK(chmod(GDBTRACE_DEVICE, 0666) == 0, "chmod");
  c = fork();
  if (c == 0) {
    if (setgid(65534) || setuid(65534))
      _exit(10);
    prctl(PR_SET_DUMPABLE, 1); // a uid change clears it; our own children must stay ptraceable
    struct session s;
    if (open_session(&s, 16))
      _exit(12);
    struct gdbtrace_action act = {.kind = GDBTRACE_ACT_REGS};
    if (add_probe(&s, root_victim, (uintptr_t)probe_me, 1, &act, 1, NULL, 0, 0, NULL) != -EPERM)
      _exit(13);
    // its own process is fine
    struct tracee t = start_tracee(20, T_PLAIN);
    uint32_t id;
    if (add_probe(&s, t.pid, (uintptr_t)probe_me, 1, &act, 1, NULL, 0, 0, &id))
      _exit(14);
    ioctl(s.fd, GDBTRACE_IOC_START);
    if (run_tracee(t) != 0)
      _exit(15);
    struct gdbtrace_probe_status ps = probe_status(&s, id);
    if (ps.frames != 20)
      _exit(16);
    _exit(0);
  }
  waitpid(c, &st, 0);
  chmod(GDBTRACE_DEVICE, 0600);
  kill(root_victim, SIGKILL);
  waitpid(root_victim, NULL, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "nobody session: status %d", WEXITSTATUS(st));
  OK();
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  test_basic_frames();
  test_condition_passcount_tsv();
  test_overflow_counts_drops();
  test_many_probes();
  test_close_removes_probes();
  test_fork_exec_exit();
  test_two_sessions_same_site();
  test_runaway_bytecode();
  test_emulation();
  test_hostile_ioctls();
  test_unprivileged();
  printf("gt_test: %d failure(s)\n", failures);
  return failures != 0;
}
