/* Bench tracee for the workload matrix (bench/workloads.sh): one probe site per workload, each
 * called n times in its own phase, so one traced run measures every workload at once. Each phase
 * prints `phase=<site> n=<n> ns_per_iter=<x>` measured inside the tracee.
 *
 * Sites (all take (long a, long b, struct blob64 *p)):
 *   w_regs w_args w_struct w_cond w_tsv  first instruction `nop`: emulated by the kernel at a
 * uprobe; then a 7-byte `mov disp(%rip),%rax` at +1, where gdb's fast tracepoints (which need an
 * instruction of >= 5 bytes) go w_step                               first instruction `mov
 * disp(%rip),%rax`: single-stepped lib_site (libbenchsite.so, dlopen'ed before bench_ready()) `nop`
 * then the 7-byte mov, as above Usage: bench_work <n> [site ...]   (default: every site) A debugger
 * stops at bench_ready() (the library is loaded by then) to place its tracepoints.
 * BENCH_WORK_REPS=<site>:<k>[,<site>:<k>...] runs those phases k * n times (a cheap site's phase
 * then lasts as long as the others, so one slow patch of a shared machine weighs the same). */
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct blob64 {
  long v[8];
};

volatile long sink;

#define EMULATED_SITE(name)                                                                        \
  __attribute__((noinline)) void name(long a, long b, struct blob64* p) {                          \
    asm volatile("nop; mov sink(%%rip), %%rax" ::: "rax");                                         \
    sink += a ^ b ^ p->v[a & 7];                                                                   \
  }
EMULATED_SITE(w_regs)
EMULATED_SITE(w_args)
EMULATED_SITE(w_struct)
EMULATED_SITE(w_cond)
EMULATED_SITE(w_tsv)
/* No tracepoint: bench/_workloads.py puts a raw tracefs uprobe here in every traced run, the floor
 * measured in the same process at the same time. */
EMULATED_SITE(w_ref)

/* First instruction a 5-byte nop (USDT-style): Linux 6.18+ can replace the uprobe's trap there with
 * a call into a uprobe trampoline (arch_uprobe_optimize). */
__attribute__((noinline)) void w_nop5(long a, long b, struct blob64* p) {
  asm volatile(".byte 0x0f,0x1f,0x44,0x00,0x00; mov sink(%%rip), %%rax" ::: "rax");
  sink += a ^ b ^ p->v[a & 7];
}

__attribute__((noinline)) void w_step(long a, long b, struct blob64* p) {
  asm volatile("mov sink(%%rip), %%rax" ::: "rax");
  sink += a ^ b ^ p->v[a & 7];
}

typedef void (*site_fn)(long, long, struct blob64*);

__attribute__((noinline)) void bench_ready(void) {
  asm volatile("" ::: "memory");
}

static site_fn load_lib_site(void) {
  char exe[PATH_MAX], path[PATH_MAX + 32];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len <= 0)
    return NULL;
  exe[len] = 0;
  snprintf(path, sizeof path, "%s/libbenchsite.so", dirname(exe));
  void* h = dlopen(path, RTLD_NOW);
  return h ? (site_fn)dlsym(h, "lib_site") : NULL;
}

static double run_phase(site_fn f, long n, struct blob64* p) {
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long i = 0; i < n; i++) {
    p->v[i & 7] = i;
    f(i, 3 * i, p);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / n;
}

// k from BENCH_WORK_REPS for SITE, else 1.
static long reps_for(const char* site) {
  const char* spec = getenv("BENCH_WORK_REPS");
  size_t len = strlen(site);
  for (const char* at = spec; at && *at;) {
    if (strncmp(at, site, len) == 0 && at[len] == ':')
      return atol(at + len + 1) > 0 ? atol(at + len + 1) : 1;
    at = strchr(at, ',');
    at = at ? at + 1 : NULL;
  }
  return 1;
}

int main(int argc, char** argv) {
  long n = argc > 1 ? atol(argv[1]) : 100000;
  struct {
    const char* name;
    site_fn fn;
  } sites[] = {
      {"w_regs", w_regs}, {"w_args", w_args}, {"w_struct", w_struct},        {"w_cond", w_cond},
      {"w_tsv", w_tsv},   {"w_step", w_step}, {"lib_site", load_lib_site()}, {"w_nop5", w_nop5},
      {"w_ref", w_ref}};
  struct blob64 blob = {{0}};
  bench_ready();
  for (size_t s = 0; s < sizeof sites / sizeof sites[0]; s++) {
    int wanted = argc <= 2;
    for (int k = 2; k < argc; k++)
      wanted |= strcmp(argv[k], sites[s].name) == 0;
    if (!wanted)
      continue;
    if (!sites[s].fn) {
      printf("phase=%s missing: %s\n", sites[s].name, dlerror());
      continue;
    }
    long phase_n = n * reps_for(sites[s].name);
    printf("phase=%s n=%ld ns_per_iter=%.1f\n", sites[s].name, phase_n,
           run_phase(sites[s].fn, phase_n, &blob));
    fflush(stdout);
  }
  return 0;
}
