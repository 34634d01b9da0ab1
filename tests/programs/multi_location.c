/* Tracee for tracepoints with several locations (tests/integration/test_trace_counts.py).
 *
 *   multi_location [FIRST [SECOND]]
 * record() is inlined into first_site() and second_site(), so `trace record` has two locations.
 * main calls first_site(i) FIRST times (default 3), then second_site(i) SECOND times (default 5),
 * then done(); record(value) sees value i at the first site and 1000 + i at the second. */
#include <stdio.h>
#include <stdlib.h>

volatile int sink;

static inline __attribute__((always_inline)) void record(int value) {
  sink += value;
}

__attribute__((noinline)) void first_site(int i) {
  record(i);
}

__attribute__((noinline)) void second_site(int i) {
  record(1000 + i);
}

__attribute__((noinline)) void done(void) {
  printf("multi_location done: %d\n", sink);
}

int main(int argc, char** argv) {
  int first = argc > 1 ? atoi(argv[1]) : 3;
  int second = argc > 2 ? atoi(argv[2]) : 5;
  for (int i = 0; i < first; i++)
    first_site(i);
  for (int i = 0; i < second; i++)
    second_site(i);
  done();
  return 0;
}
