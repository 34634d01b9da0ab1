/* Bench tracee for multi-threaded tracepoint throughput (bench/threads.sh): <threads> threads each
 * call t_site(tid, i, &blob) n times, all on the same probe site. Before each call the thread fills
 * its own 64-byte blob with (tid << 32 | i) in every word, so a collected frame of `$regs, *p` is
 * consistent only if rdi = tid, rsi = i, rdx = p and all 8 words of *p = tid << 32 | i: a torn
 * frame (data from two hits, or a blob read while being rewritten) breaks that. t_site starts with
 * `nop` (emulated at a uprobe) then a 7-byte rip-relative mov (fast tracepoints go at +1). Usage:
 * bench_threads <threads> <n per thread> [seconds] [pin] [reps] [ring_mb]; prints wall time, hits
 * and hits per second. With SECONDS (0: none), each thread stops after that long (or n calls,
 * whichever comes first; the clock is read every 4096 calls; with REPS, each part lasts that long),
 * so a run lasts as long however fast the machine is that minute. With PIN = 1, thread k runs on
 * the k-th CPU the process may use (round robin): a run of a few ms is over before the kernel's
 * load balancing moves a thread, so two threads woken on one CPU stayed there and ran one after the
 * other (sched_getcpu said so), which read as no scaling. The threads start together from a spin
 * (each waits, pinned and running, for the others): woken from a barrier, a thread on an idle CPU
 * of a VM started up to ~100 us after the first, a few percent of a 2 ms run. With REPS, each
 * thread's n calls are made in REPS timed parts 20 ms apart (n / REPS calls each),
 * every thread finishing one before any starts the next (they block between parts, so a thread done
 * early takes no CPU from one still calling): wall_ns adds the parts up, hits_per_s is the median
 * part's, and reps_hits_per_s lists them all. On a shared VM a stall of a few to tens of ms moved a
 * whole 70 ms run's throughput by 20-40 %; it moves a few parts of nine, and the median little. The
 * calls' arguments (tid, i) are the same as in one part. RING_MB: see write_record. */
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
static volatile int ready; // each worker counts itself ready for a part, then spins until all are
static pthread_barrier_t between_parts;
static double started[MAX_REPS][64],
    finished[MAX_REPS][64];           // a part's wall: last finish - first start
static long part_calls[MAX_REPS][64]; // calls each thread made in each part

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

__attribute__((noinline)) void t_site(long tid, long i, struct blob64* p) {
  asm volatile("nop; mov sink(%%rip), %%rax" ::"D"(tid), "S"(i), "d"(p) : "rax", "memory");
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
// hit: a 168-byte record (seq, stamp, slot, 18 registers) into the next 256-byte slot of the
// thread's own ring of RING_MB (pre-touched), with a prefetchw 16 slots ahead, as jumppad_site.cc's
// emit_record does. No pad, no tracing: the memory traffic alone, whose scaling over threads is the
// machine's ceiling for any collector that writes a record per hit (bench/jumppad.sh).
static size_t ring_bytes;

static void write_record(unsigned char* ring, long i, long tid) {
  const size_t at = ((size_t)i * 256) & (ring_bytes - 1);
  long* r = (long*)(ring + at);
  r[1] = i;   // stamp
  r[2] = tid; // slot
  for (int k = 0; k < 18; k++)
    r[3 + k] = i + k;
  __atomic_store_n(&r[0], i + 1, __ATOMIC_RELEASE); // seq: committed
  for (int line = 0; line < 3; line++)
    __builtin_prefetch(ring + ((at + 16 * 256 + 64 * line) & (ring_bytes - 1)), 1);
}

static int threads_total;

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
  long i = 0;
  for (int rep = 0; rep < reps; rep++) {
    if (rep > 0) {
      pthread_barrier_wait(&between_parts);
      usleep(20000); // parts 20 ms apart sample different moments of a noisy machine
    }
    __atomic_add_fetch(&ready, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&ready, __ATOMIC_SEQ_CST) < threads_total * (rep + 1))
      __builtin_ia32_pause();
    started[rep][tid - 1] = now_ns();
    const double end = seconds > 0 ? started[rep][tid - 1] + seconds * 1e9 : 0;
    const long last = n_per_thread / reps * (rep + 1) + (rep == reps - 1 ? n_per_thread % reps : 0);
    const long first = i;
    for (; i < last; i++) {
      if (end && ((i - first) & 4095) == 0 && now_ns() >= end)
        break;
      for (int k = 0; k < 8; k++)
        ((volatile long*)blob.v)[k] = tid << 32 | i;
      t_site(tid, i, &blob);
      if (ring)
        write_record(ring, i, tid);
    }
    finished[rep][tid - 1] = now_ns();
    part_calls[rep][tid - 1] = i - first;
    i = last; // a timed part stops early: the next part's calls keep their own numbers
  }
  return NULL;
}

static int by_value(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 1;
  n_per_thread = argc > 2 ? atol(argv[2]) : 100000;
  seconds = argc > 3 ? atof(argv[3]) : 0;
  pin = argc > 4 ? atoi(argv[4]) : 0;
  reps = argc > 5 ? atoi(argv[5]) : 1;
  ring_bytes = argc > 6 ? (size_t)atol(argv[6]) << 20 : 0;
  if (ring_bytes & (ring_bytes - 1))
    return 2; // a power of two
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
    return 2;
  pthread_t t[64];
  if (threads < 1 || threads > 64 || reps < 1 || reps > MAX_REPS || n_per_thread < reps)
    return 2;
  threads_total = threads;
  pthread_barrier_init(&between_parts, NULL, (unsigned)threads);
  for (long k = 0; k < threads; k++)
    pthread_create(&t[k], NULL, worker, (void*)(k + 1));
  for (int k = 0; k < threads; k++)
    pthread_join(t[k], NULL);
  double ns = 0, rates[MAX_REPS];
  char listed[MAX_REPS * 16] = "";
  for (int rep = 0; rep < reps; rep++) {
    double first = started[rep][0], last = finished[rep][0];
    for (int k = 1; k < threads; k++) {
      first = started[rep][k] < first ? started[rep][k] : first;
      last = finished[rep][k] > last ? finished[rep][k] : last;
    }
    long calls = 0;
    for (int k = 0; k < threads; k++)
      calls += part_calls[rep][k];
    ns += last - first;
    rates[rep] = (double)calls / (last - first) * 1e9;
    snprintf(listed + strlen(listed), sizeof listed - strlen(listed), "%s%.0f", rep ? "," : "",
             rates[rep]);
  }
  long hits = 0;
  for (int rep = 0; rep < reps; rep++)
    for (int k = 0; k < threads; k++)
      hits += part_calls[rep][k];
  double rate = hits / ns * 1e9;
  if (reps > 1) {
    qsort(rates, (size_t)reps, sizeof rates[0], by_value);
    rate = rates[reps / 2];
  }
  printf("threads=%d n=%ld hits=%ld wall_ns=%.0f hits_per_s=%.0f ns_per_iter=%.1f", threads,
         n_per_thread, hits, ns, rate, ns / ((double)hits / threads));
  if (reps > 1)
    printf(" reps_hits_per_s=%s", listed);
  printf("\n");
  fflush(stdout);
  return 0;
}
