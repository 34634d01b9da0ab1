/* Calls counter_bump() from libcounter.so N times through the executable's PLT stub (a tracepoint
 * set before the library loads first resolves to that stub).
 * Usage: plt_calls_uses_libcounter [N (default 5000)] */
#include <stdio.h>
#include <stdlib.h>

int counter_bump(int value);
extern int counter_calls;

void calls_done(int n) { __asm__ volatile("" ::"r"(n) : "memory"); }

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 5000;
  long sum = 0;
  for (int i = 0; i < n; i++) sum += counter_bump(i);
  calls_done(n);
  printf("plt_calls done: %d calls, sum %ld\n", counter_calls, sum);
  return 0;
}
