/* A global a fast tracepoint collects while it becomes unreadable: jp_mem_site(i) is called N times
 * (argument 1, default 20), each time after jp_guarded.value = 3 * i. In mode "protect" (argument
 * 2) the page holding jp_guarded is PROT_NONE for the calls from N/2 to 3N/4, then readable again:
 * the program never touches it meanwhile, so only a tracer reading it could fault. In mode "late"
 * (argument 3: milliseconds) the calls are spread over that time at 1 ms each, then the page goes
 * PROT_NONE and 1 000 more calls follow (for a tracer killed while the program runs). The site's
 * first instruction is a 7-byte rip-relative load, one the jump pad can take. Prints the calls and
 * the sum of the site's results; mem_done() is a place for a breakpoint. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

volatile long jp_zero;
struct guarded {
  long value;
  char rest[4096 - sizeof(long)];
};
struct guarded jp_guarded __attribute__((aligned(4096)));
long jp_wide[13]; // 104 bytes: a collection longer than a one-slot pad record

__attribute__((noinline, optimize("O2"))) long jp_mem_site(long i) {
  __asm__ volatile("mov jp_zero(%%rip), %%rax" ::: "rax"); // a 7-byte first instruction
  return i * 2 + 1;
}

__attribute__((noinline)) void mem_done(void) {
  __asm__ volatile("");
}

static void protect(int prot) {
  if (mprotect(&jp_guarded, sizeof jp_guarded, prot) != 0) {
    perror("mprotect");
    exit(2);
  }
}

int main(int argc, char** argv) {
  long n = argc > 1 ? atol(argv[1]) : 20;
  const char* mode = argc > 2 ? argv[2] : "plain";
  long late_ms = argc > 3 ? atol(argv[3]) : 0;
  long calls = 0, sum = 0;
  struct timespec ms = {0, 1000000};
  for (long i = 0; i < n; i++) {
    if (!strcmp(mode, "protect") && i == n / 2)
      protect(PROT_NONE);
    if (!strcmp(mode, "protect") && i == 3 * n / 4)
      protect(PROT_READ | PROT_WRITE);
    if (strcmp(mode, "protect") || i < n / 2 || i >= 3 * n / 4)
      jp_guarded.value = 3 * i;
    jp_wide[12] = i;
    sum += jp_mem_site(i);
    calls++;
    if (late_ms)
      nanosleep(&ms, NULL);
  }
  if (!strcmp(mode, "late")) {
    for (long t = n; t < late_ms; t++)
      nanosleep(&ms, NULL);
    protect(PROT_NONE);
    for (long i = 0; i < 1000; i++, calls++)
      sum += jp_mem_site(i);
    protect(PROT_READ | PROT_WRITE);
  }
  printf("jp_memory calls=%ld sum=%ld\n", calls, sum);
  fflush(stdout);
  mem_done();
  return 0;
}
