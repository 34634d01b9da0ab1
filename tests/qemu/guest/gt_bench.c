// Per-hit cost inside the QEMU guest (bench/kmodule.sh runs it through run.sh):
//   gt_bench offsets                 file offsets of the two probe sites
//   gt_bench run SITE N              untraced loop (or traced by tracefs/gdb from outside)
//   gt_bench module SITE N [noemu|fpu]  the loop in a forked child, probed through
//                                    /dev/gdbtrace collecting the 'R' block (fpu: with
//                                    the x87/SSE/AVX registers, GDBTRACE_ACT_REGS_FPU)
// SITE: nop  (first instruction nop: the kernel emulates it itself)
//       load (mov disp(%rip),%rax: single-stepped by the kernel unless our
//             handler emulates it)
// Prints "BENCH <what> site=<site> n=<n> ns_per_iter=<x>".
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gdbtrace_uapi.h"

long bench_var;
long site_nop(long, long);
long site_load(long, long);
__asm__(".text\n"
        ".globl site_nop\n.type site_nop,@function\nsite_nop:\n nop\n lea (%rdi,%rsi),%rax\n ret\n"
        ".globl site_load\n.type site_load,@function\nsite_load:\n mov bench_var(%rip),%rax\n"
        " add %rdi,%rax\n mov %rax,bench_var(%rip)\n ret\n");

static long (*site_fn(const char* s))(long, long) {
  return strcmp(s, "nop") == 0 ? site_nop : site_load;
}

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static double run_loop(long (*fn)(long, long), long n) {
  double t0 = now_ns();
  for (long i = 0; i < n; i++)
    fn(i, 3 * i);
  return (now_ns() - t0) / n;
}

static uint64_t file_offset(uintptr_t addr) {
  FILE* f = fopen("/proc/self/maps", "r");
  char line[512];
  uint64_t off = 0;
  while (f && fgets(line, sizeof line, f)) {
    unsigned long lo, hi, pg;
    if (sscanf(line, "%lx-%lx %*s %lx", &lo, &hi, &pg) == 3 && addr >= lo && addr < hi) {
      off = addr - lo + pg;
      break;
    }
  }
  if (f)
    fclose(f);
  return off;
}

static long drain(uint8_t* map, const struct gdbtrace_init* in) {
  long n = 0;
  for (uint32_t r = 0; r < in->nr_rings; r++) {
    struct gdbtrace_ring_header* h = (void*)(map + r * in->ring_stride);
    uint64_t head = __atomic_load_n(&h->head, __ATOMIC_ACQUIRE), tail = h->tail;
    uint8_t* data = (uint8_t*)h + h->data_offset;
    while (tail < head) {
      struct gdbtrace_record rec;
      uint64_t off = tail % h->data_size;
      memcpy(&rec, data + off, sizeof rec);
      if (rec.flags & GDBTRACE_REC_PAD) {
        tail += h->data_size - off;
        continue;
      }
      n++;
      tail += (sizeof rec + rec.len + 15) & ~15ull;
    }
    __atomic_store_n(&h->tail, tail, __ATOMIC_RELEASE);
  }
  return n;
}

static int module_bench(const char* site, long n, int emulate, int fpu) {
  long (*fn)(long, long) = site_fn(site);
  int go[2], res[2];
  if (pipe(go) || pipe(res))
    return 1;
  pid_t child = fork();
  if (child == 0) {
    char c;
    // gdbtrace.ko probes only a process whose ptracer asks: make us its tracer.
    if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) || read(go[0], &c, 1) != 1)
      _exit(1);
    double ns = run_loop(fn, n);
    if (write(res[1], &ns, sizeof ns) != sizeof ns)
      _exit(1);
    _exit(0);
  }
  int fd = open(GDBTRACE_DEVICE, O_RDWR);
  struct gdbtrace_init in = {
      .version = GDBTRACE_UAPI_VERSION, .regblock_size = 816, .ring_shift = 22};
  if (fd < 0 || ioctl(fd, GDBTRACE_IOC_INIT, &in))
    return perror("init"), 1;
  uint8_t* map = mmap(NULL, in.mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int exe = open("/proc/self/exe", O_RDONLY);
  struct gdbtrace_action act = {.kind = GDBTRACE_ACT_REGS,
                                .flags = fpu ? GDBTRACE_ACT_REGS_FPU : 0};
  struct gdbtrace_probe_add a = {.pid = child,
                                 .fd = exe,
                                 .offset = file_offset((uintptr_t)fn),
                                 .address = (uintptr_t)fn,
                                 .tp_number = 1,
                                 .nr_actions = 1,
                                 .actions = (uintptr_t)&act};
  if (emulate) // the module decodes the site and emulates what it can
    a.flags = GDBTRACE_PROBE_EMULATE;
  if (ioctl(fd, GDBTRACE_IOC_ADD, &a) || ioctl(fd, GDBTRACE_IOC_START))
    return perror("add"), 1;
  if (write(go[1], "g", 1) != 1)
    return 1;
  long frames = 0;
  double ns = 0;
  for (;;) {
    struct pollfd p[2] = {{fd, POLLIN, 0}, {res[0], POLLIN, 0}};
    poll(p, 2, 20);
    frames += drain(map, &in);
    if (p[1].revents & POLLIN) {
      if (read(res[0], &ns, sizeof ns) != sizeof ns)
        return 1;
      break;
    }
  }
  waitpid(child, NULL, 0);
  frames += drain(map, &in);
  struct gdbtrace_probe_status st = {.id = a.id};
  ioctl(fd, GDBTRACE_IOC_PROBE_STATUS, &st);
  printf("BENCH module%s%s site=%s n=%ld ns_per_iter=%.0f frames=%ld drops=%llu emulated=%llu\n",
         a.emu.op ? "+emulation" : "", fpu ? "+fpu" : "", site, n, ns, frames,
         (unsigned long long)st.drops, (unsigned long long)st.emulated);
  close(fd);
  return 0;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0); // under gdb the tracee may be killed right after printing
  if (argc >= 2 && strcmp(argv[1], "offsets") == 0) {
    printf("nop 0x%llx\nload 0x%llx\n", (unsigned long long)file_offset((uintptr_t)site_nop),
           (unsigned long long)file_offset((uintptr_t)site_load));
    return 0;
  }
  if (argc >= 4 && strcmp(argv[1], "run") == 0) {
    long n = atol(argv[3]);
    double ns = run_loop(site_fn(argv[2]), n);
    printf("BENCH %s site=%s n=%ld ns_per_iter=%.0f\n", argc > 4 ? argv[4] : "untraced", argv[2], n,
           ns);
    return 0;
  }
  if (argc >= 4 && strcmp(argv[1], "module") == 0) {
    const char* opt = argc > 4 ? argv[4] : "";
    return module_bench(argv[2], atol(argv[3]), strcmp(opt, "noemu") != 0, strcmp(opt, "fpu") == 0);
  }
  fprintf(stderr, "usage: gt_bench offsets | run SITE N [label] | module SITE N [noemu|fpu]\n");
  return 2;
}
