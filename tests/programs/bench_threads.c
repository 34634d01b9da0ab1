/* Bench tracee for multi-threaded tracepoint throughput (bench/threads.sh): <threads> threads each
 * call t_site(tid, i, &blob) n times, all on the same probe site. Before each call the thread fills
 * its own 64-byte blob with (tid << 32 | i) in every word, so a collected frame of `$regs, *p` is
 * consistent only if rdi = tid, rsi = i, rdx = p and all 8 words of *p = tid << 32 | i: a torn
 * frame (data from two hits, or a blob read while being rewritten) breaks that. t_site starts with
 * `nop` (emulated at a uprobe) then a 7-byte rip-relative mov (fast tracepoints go at +1). Usage:
 * bench_threads <threads> <n per thread> [seconds] [pin]; prints wall time, hits and hits per
 * second. With SECONDS (0: none), each thread stops after that long (or n calls, whichever comes
 * first; the clock is read every 4096 calls), so a run lasts as long however fast the machine is
 * that minute. With PIN = 1, thread k runs on the k-th CPU the process may use (round robin): a run
 * of a few ms is over before the kernel's load balancing moves a thread, so two threads woken on
 * one CPU stayed there and ran one after the other (sched_getcpu said so), which read as no
 * scaling. The threads start together from a spin (each waits, pinned and running, for one
 * store): woken from a barrier, a thread on an idle CPU of a VM started up to ~100 us after the
 * first, a few percent of a 2 ms run. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct blob64 {
  long v[8];
};

volatile long sink;
static long n_per_thread;
static double seconds; // 0: n calls per thread
static int pin;        // 1: thread k on the k-th allowed CPU
static cpu_set_t allowed;
static volatile int ready, go; // the start: each worker counts itself ready, then spins on go
static double started[64], finished[64]; // per thread: the wall time is last finish - first start
static long done[64];                    // calls each thread made

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

static void* worker(void* arg) {
  long tid = (long)arg;
  struct blob64 blob;
  if (pin)
    pin_to(tid - 1);
  __atomic_add_fetch(&ready, 1, __ATOMIC_SEQ_CST);
  while (!go)
    __builtin_ia32_pause();
  started[tid - 1] = now_ns();
  const double end = seconds > 0 ? started[tid - 1] + seconds * 1e9 : 0;
  long i;
  for (i = 0; i < n_per_thread; i++) {
    if (end && (i & 4095) == 0 && now_ns() >= end)
      break;
    for (int k = 0; k < 8; k++)
      ((volatile long*)blob.v)[k] = tid << 32 | i;
    t_site(tid, i, &blob);
  }
  done[tid - 1] = i;
  finished[tid - 1] = now_ns();
  return NULL;
}

int main(int argc, char** argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 1;
  n_per_thread = argc > 2 ? atol(argv[2]) : 100000;
  seconds = argc > 3 ? atof(argv[3]) : 0;
  pin = argc > 4 ? atoi(argv[4]) : 0;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
    return 2;
  pthread_t t[64];
  if (threads < 1 || threads > 64)
    return 2;
  for (long k = 0; k < threads; k++)
    pthread_create(&t[k], NULL, worker, (void*)(k + 1));
  while (__atomic_load_n(&ready, __ATOMIC_SEQ_CST) < threads)
    sched_yield();
  go = 1;
  for (int k = 0; k < threads; k++)
    pthread_join(t[k], NULL);
  double first = started[0], last = finished[0];
  for (int k = 1; k < threads; k++) {
    first = started[k] < first ? started[k] : first;
    last = finished[k] > last ? finished[k] : last;
  }
  double ns = last - first;
  long hits = 0;
  for (int k = 0; k < threads; k++)
    hits += done[k];
  printf("threads=%d n=%ld hits=%ld wall_ns=%.0f hits_per_s=%.0f ns_per_iter=%.1f\n", threads,
         n_per_thread, hits, ns, hits / ns * 1e9, ns / ((double)hits / threads));
  fflush(stdout);
  return 0;
}
