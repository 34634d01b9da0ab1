/* Pointers a trace may follow: jp_deref(p, valid) is called with a valid pointer, then NULL and/or
 * a pointer into a page that was unmapped (argument: null, unmapped or both; default both); it
 * reads *p only when VALID, so the program itself never faults (a tracer that reads *p must not
 * make it fault either). Its first instruction is a 7-byte rip-relative load, one the jump pad
 * could take. deref_done() is a place for a breakpoint. */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

volatile long jp_zero;

__attribute__((noinline, optimize("O2"))) long jp_deref(long* p, long valid) {
  __asm__ volatile("mov jp_zero(%%rip), %%rax" ::: "rax"); // a 7-byte first instruction
  return valid ? *p : -1;
}

__attribute__((noinline)) void deref_done(void) {
  __asm__ volatile("");
}

int main(int argc, char** argv) {
  const char* which = argc > 1 ? argv[1] : "both";
  static long value = 0x1234567;
  long a = jp_deref(&value, 1);
  // Unmapped after the first call: a uprobe's first hit maps the kernel's [uprobes] page into the
  // first free gap, which would otherwise be this one.
  long page = sysconf(_SC_PAGESIZE);
  long* gone = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  munmap(gone, page);
  long b = strcmp(which, "unmapped") ? jp_deref(NULL, 0) : -1;
  long c = strcmp(which, "null") ? jp_deref(gone + 2, 0) : -1;
  printf("deref results %lx %ld %ld\n", a, b, c);
  fflush(stdout);
  deref_done();
  return 0;
}
