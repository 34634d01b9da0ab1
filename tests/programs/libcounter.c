/* Shared library for the pending-library tracepoint test (see plt_calls_uses_libcounter.c). */
int counter_calls;

int counter_bump(int value) {
  counter_calls++;
  return value + counter_calls;
}
