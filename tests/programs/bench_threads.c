/* Bench tracee for multi-threaded tracepoint throughput (bench/threads.sh): <threads> threads each
 * call t_site(tid, i, &blob) n times, all on the same probe site. Before each call the thread fills
 * its own 64-byte blob with (tid << 32 | i) in every word, so a collected frame of `$regs, *p` is
 * consistent only if rdi = tid, rsi = i, rdx = p and all 8 words of *p = tid << 32 | i: a torn
 * frame (data from two hits, or a blob read while being rewritten) breaks that. t_site starts with
 * `nop` (emulated at a uprobe) then a 7-byte rip-relative mov (fast tracepoints go at +1). Usage:
 * bench_threads <threads> <n per thread> [seconds] [pin] [reps] [ring_mb] [paired] [ref]; prints
 * wall time, hits and hits per second. With SECONDS (0: none), each thread stops after that long
 * (or n calls, whichever comes first; the clock is read every 4096 calls; with REPS, each part
 * lasts that long), so a run lasts as long however fast the machine is that minute. With PIN = 1,
 * thread k runs on the k-th CPU the process may use (round robin): a run of a few ms is over before
 * the kernel's load balancing moves a thread, so two threads woken on one CPU stayed there and ran
 * one after the other (sched_getcpu said so), which read as no scaling. The threads start together
 * from a spin (each waits, pinned and running, for the others): woken from a barrier, a thread on
 * an idle CPU of a VM started up to ~100 us after the first, a few percent of a 2 ms run. With
 * REPS, each thread's n calls are made in REPS timed parts 20 ms apart (n / REPS calls each), every
 * thread finishing one before any starts the next (they block between parts, so a thread done early
 * takes no CPU from one still calling): wall_ns adds the parts up, hits_per_s is the median part's,
 * and reps_hits_per_s lists them all. On a shared VM a stall of a few to tens of ms moved a whole
 * 70 ms run's throughput by 20-40 %; it moves a few parts of nine, and the median little. The
 * calls' arguments (tid, i) are the same as in one part. RING_MB: see write_record. PAIRED = 1
 * (threads > 1): REPS cycles of parts, each thread alone (pinned, thread 1 first) then every thread
 * together; each thread makes 2n calls (i from 0 to 2n - 1), n alone and n together. wall_ns adds
 * up the together parts, hits_per_s is the median together part's, one_hits_per_s the median of
 * thread 1's alone parts, and paired_scaling the median over cycles of T x the together rate / the
 * sum of the T alone rates: each CPU's own rate a few tens of ms before. On this shared VM one
 * vCPU's speed moves for seconds at a time (a floor's 2-thread runs back to back scaled 1.60-1.99x
 * over thread 1 alone, its 1-thread rate steady within 7 %): the scaling of two separate runs
 * judged the vCPUs' speed of the moment. REF = 1 (paired): each cycle first runs the same parts on
 * t_ref, a twin of t_site at another address (the bench puts the raw floor's uprobe there), then on
 * t_site; each thread makes 4n calls (i up to 4n - 1), 2n at each site. hits, wall_ns and
 * hits_per_s are t_site's; ref_scaling is t_ref's paired scaling, and vs_ref the median over cycles
 * of t_site's scaling over t_ref's in the same cycle: the paired runs still scaled 1.69x in one
 * round and 1.96x in the next, both threads slowed together for seconds when they ran at once; a
 * cycle's two sites are ~100 ms apart. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct blob64 {
  long v[8];
};

volatile long sink;
static long n_per_thread;
static double seconds; // 0: n calls per thread
static int pin;        // 1: thread k on the k-th allowed CPU
static cpu_set_t allowed;
static int reps = 1;
#define MAX_REPS 16
#define MAX_PARTS (10 * MAX_REPS)
static int paired; // 1: cycles of parts, each thread alone then all together
static int ref;    // 1 (paired): each cycle on t_ref first, then on t_site
static int parts = 1;
static volatile int
    ready[MAX_PARTS]; // each worker counts itself ready for a part, then spins until all are
static pthread_barrier_t between_parts;
static double started[MAX_PARTS][64],
    finished[MAX_PARTS][64];           // a part's wall: last finish - first start
static long part_calls[MAX_PARTS][64]; // calls each thread made in each part

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

__attribute__((noinline)) void t_site(long tid, long i, struct blob64* p) {
  asm volatile("nop; mov sink(%%rip), %%rax" ::"D"(tid), "S"(i), "d"(p) : "rax", "memory");
}

// t_site's twin (REF): its own address, the same instructions. The asm's comment keeps gcc's
// identical-code folding from making the two one function.
__attribute__((noinline)) void t_ref(long tid, long i, struct blob64* p) {
  asm volatile("nop; mov sink(%%rip), %%rax # t_ref" ::"D"(tid), "S"(i), "d"(p) : "rax", "memory");
}

// The (K mod the number of allowed CPUs)-th CPU of ALLOWED, alone in a set.
static void pin_to(long k) {
  int n = CPU_COUNT(&allowed), want = (int)(k % n);
  for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
    if (CPU_ISSET(cpu, &allowed) && want-- == 0) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      sched_setaffinity(0, sizeof one, &one);
      return;
    }
}

// RING_MB > 0: besides the call, each iteration writes what a jump pad writes for a `collect $regs`
// hit: a 168-byte record (seq, stamp, slot, 18 registers) into the next 192-byte slot of the
// thread's own ring of RING_MB (pre-touched), with a prefetchw 16 slots ahead, as jumppad_site.cc's
// emit_record does. No pad, no tracing: the memory traffic alone, whose scaling over threads is the
// machine's ceiling for any collector that writes a record per hit (bench/jumppad.sh).
static size_t ring_bytes;
enum { kSlot = 192 };

static void write_record(unsigned char* ring, long i, long tid) {
  static __thread size_t next; // the thread's next slot
  const size_t at = next;
  next = at + 2 * kSlot > ring_bytes ? 0 : at + kSlot;
  long* r = (long*)(ring + at);
  r[1] = i;   // stamp
  r[2] = tid; // slot
  for (int k = 0; k < 18; k++)
    r[3 + k] = i + k;
  __atomic_store_n(&r[0], i + 1, __ATOMIC_RELEASE); // seq: committed
  const size_t ahead = at + 16 * kSlot + 3 * 64 > ring_bytes ? 0 : at + 16 * kSlot;
  for (int line = 0; line < 3; line++)
    __builtin_prefetch(ring + ahead + 64 * line, 1);
}

static int threads_total;

// Paired: the thread alone in PART (1-based), 0 for a part of every thread.
static int alone_in(int part) {
  const int j = part % (threads_total + 1);
  return paired && j < threads_total ? j + 1 : 0;
}

// REF: whether PART calls t_ref (the first half of each cycle).
static int on_ref(int part) {
  return ref && part % (2 * (threads_total + 1)) < threads_total + 1;
}

static void* worker(void* arg) {
  long tid = (long)arg;
  struct blob64 blob;
  if (pin)
    pin_to(tid - 1);
  unsigned char* ring = NULL;
  if (ring_bytes) {
    ring = aligned_alloc(4096, ring_bytes);
    if (!ring)
      return NULL;
    memset(ring, 0, ring_bytes);
  }
  // Paired: a thread takes part in its own alone part and the together part
  // of each cycle; each thread splits its calls evenly over its own parts.
  const int my_parts = (paired ? 2 * reps : reps) * (ref ? 2 : 1);
  const long my_calls = (paired ? 2 * n_per_thread : n_per_thread) * (ref ? 2 : 1);
  long i = 0;
  int mine = 0;
  for (int part = 0; part < parts; part++) {
    if (part > 0) {
      pthread_barrier_wait(&between_parts);
      usleep(20000); // parts 20 ms apart sample different moments of a noisy machine
    }
    const int alone = alone_in(part);
    if (alone && alone != tid)
      continue;
    const int taking_part = alone ? 1 : threads_total;
    __atomic_add_fetch(&ready[part], 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&ready[part], __ATOMIC_SEQ_CST) < taking_part)
      __builtin_ia32_pause();
    started[part][tid - 1] = now_ns();
    const double end = seconds > 0 ? started[part][tid - 1] + seconds * 1e9 : 0;
    const long last =
        my_calls / my_parts * (mine + 1) + (mine == my_parts - 1 ? my_calls % my_parts : 0);
    const long first = i;
    for (; i < last; i++) {
      if (end && ((i - first) & 4095) == 0 && now_ns() >= end)
        break;
      for (int k = 0; k < 8; k++)
        ((volatile long*)blob.v)[k] = tid << 32 | i;
      if (on_ref(part))
        t_ref(tid, i, &blob);
      else
        t_site(tid, i, &blob);
      if (ring)
        write_record(ring, i, tid);
    }
    finished[part][tid - 1] = now_ns();
    part_calls[part][tid - 1] = i - first;
    i = last; // a timed part stops early: the next part's calls keep their own numbers
    mine++;
  }
  return NULL;
}

static int by_value(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

// The median of N values (of a sorted copy).
static double median(const double* v, int n) {
  double sorted[MAX_REPS];
  memcpy(sorted, v, sizeof v[0] * (size_t)n);
  qsort(sorted, (size_t)n, sizeof v[0], by_value);
  return sorted[n / 2];
}

// Part PART's rate: its calls over its wall, from the first start to the last finish of the
// threads that took part in it.
static double part_rate(int part, double* wall) {
  const int alone = alone_in(part);
  const int from = alone ? alone - 1 : 0, to = alone ? alone : threads_total;
  double first = started[part][from], last = finished[part][from];
  long calls = 0;
  for (int k = from; k < to; k++) {
    first = started[part][k] < first ? started[part][k] : first;
    last = finished[part][k] > last ? finished[part][k] : last;
    calls += part_calls[part][k];
  }
  *wall = last - first;
  return (double)calls / (last - first) * 1e9;
}

int main(int argc, char** argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 1;
  n_per_thread = argc > 2 ? atol(argv[2]) : 100000;
  seconds = argc > 3 ? atof(argv[3]) : 0;
  pin = argc > 4 ? atoi(argv[4]) : 0;
  reps = argc > 5 ? atoi(argv[5]) : 1;
  ring_bytes = argc > 6 ? (size_t)atol(argv[6]) << 20 : 0;
  paired = argc > 7 ? atoi(argv[7]) == 1 && threads > 1 : 0;
  ref = argc > 8 ? atoi(argv[8]) == 1 && paired : 0;
  if (ring_bytes & (ring_bytes - 1))
    return 2; // a power of two
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
    return 2;
  pthread_t t[64];
  if (threads < 1 || threads > 64 || reps < 1 || reps > MAX_REPS || n_per_thread < reps)
    return 2;
  parts = (paired ? (threads + 1) * reps : reps) * (ref ? 2 : 1);
  threads_total = threads;
  pthread_barrier_init(&between_parts, NULL, (unsigned)threads);
  for (long k = 0; k < threads; k++)
    pthread_create(&t[k], NULL, worker, (void*)(k + 1));
  for (int k = 0; k < threads; k++)
    pthread_join(t[k], NULL);
  // all: t_site's parts every thread took part in; one: thread 1's alone
  // (paired); scaling: each cycle's together rate over its alone rates
  // (paired), ref_scaling the same of t_ref, vs_ref their ratio (REF). Paired,
  // wall_ns and ns_per_iter are the together parts' (the latency a thread sees
  // with every thread calling); hits counts every t_site part's calls.
  double all_ns = 0, together_ns = 0, all[MAX_REPS], one[MAX_REPS], scaling[MAX_REPS],
         ref_scaling[MAX_REPS], vs_ref[MAX_REPS], alone_sum = 0;
  long hits = 0, ref_hits = 0, together_calls = 0;
  int n_all = 0, n_one = 0, n_ref = 0;
  char listed[MAX_REPS * 16] = "";
  for (int part = 0; part < parts; part++) {
    double wall;
    const double rate = part_rate(part, &wall);
    long calls = 0;
    for (int k = 0; k < threads; k++)
      calls += part_calls[part][k];
    if (alone_in(part)) {
      if (alone_in(part) == 1 && !on_ref(part))
        one[n_one++] = rate;
      alone_sum += rate;
    } else if (on_ref(part)) {
      ref_scaling[n_ref++] = threads * rate / alone_sum;
      alone_sum = 0;
    } else {
      together_ns += wall;
      together_calls += calls;
      if (paired)
        scaling[n_all] = threads * rate / alone_sum;
      if (ref)
        vs_ref[n_all] = scaling[n_all] / ref_scaling[n_ref - 1];
      alone_sum = 0;
      snprintf(listed + strlen(listed), sizeof listed - strlen(listed), "%s%.0f", n_all ? "," : "",
               rate);
      all[n_all++] = rate;
    }
    if (on_ref(part)) {
      ref_hits += calls;
      continue;
    }
    hits += calls;
    all_ns += wall;
  }
  const double ns = together_ns;
  const double rate = reps > 1 || paired ? median(all, n_all) : hits / all_ns * 1e9;
  printf("threads=%d n=%ld hits=%ld wall_ns=%.0f hits_per_s=%.0f ns_per_iter=%.1f", threads,
         n_per_thread, hits, ns, rate, ns / ((double)together_calls / threads));
  if (reps > 1)
    printf(" reps_hits_per_s=%s", listed);
  if (paired) {
    printf(" one_hits_per_s=%.0f paired_scaling=%.4f", median(one, n_one), median(scaling, n_all));
    char pairs[MAX_REPS * 8] = "";
    for (int k = 0; k < n_all; k++)
      snprintf(pairs + strlen(pairs), sizeof pairs - strlen(pairs), "%s%.3f", k ? "," : "",
               scaling[k]);
    printf(" pairs_scaling=%s", pairs);
  }
  if (ref) {
    printf(" ref_hits=%ld ref_scaling=%.4f vs_ref=%.4f", ref_hits, median(ref_scaling, n_ref),
           median(vs_ref, n_all));
    char pairs[MAX_REPS * 8] = "";
    for (int k = 0; k < n_all; k++)
      snprintf(pairs + strlen(pairs), sizeof pairs - strlen(pairs), "%s%.3f", k ? "," : "",
               vs_ref[k]);
    printf(" cycles_vs_ref=%s", pairs);
  }
  printf("\n");
  fflush(stdout);
  return 0;
}
