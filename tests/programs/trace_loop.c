/* Tracee for the tracepoint integration tests (tests/integration/test_trace_*.py).
 *
 *   trace_loop [N [THREADS]]
 * calls probe_me(i, 3*i) and step_me(i) N times (default 10), then, with THREADS > 0,
 * starts THREADS (at most 64) threads that each call probe_me(100 + id, k) for k = 0..4, then
 * calls done() (tests break there to look at the frames while the process lives).
 * Values are chosen so each frame's collected data can be predicted. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

struct point {
  int x;
  int y;
  char name[16];
};

int global_counter = 0;
long global_array[8] = {10, 20, 30, 40, 50, 60, 70, 80};
struct point global_point = {7, 8, "origin"};
struct point* global_ptr = &global_point;
char message[32] = "hello trace";
const char* greeting = "hi there"; /* collect/s greeting: tracenz */
unsigned char big_buffer[100000];  /* big_buffer[k] == k % 251 (more than one 'M' block) */

__attribute__((noinline)) int probe_me(int i, int j) {
  int local = i + j;
  struct point p = {i, j, "pt"};
  global_counter += local;
  return local + p.x - p.x;
}

__attribute__((noinline)) int step_me(int a) {
  int b = a * 2;
  b += 3;
  b ^= 1;
  return b;
}

/* One line-table entry with a 5-byte `jmp $+5` in its middle (gdb.trace/range-stepping.c's shape):
 * a tracepoint at range_site is a uprobe on an instruction the kernel emulates. */
volatile int range_value;
__attribute__((noinline)) void range_line(void) {
  __asm__ volatile("movl $1, range_value(%%rip)\n.globl range_site\nrange_site:\n"
                   " .byte 0xe9,0,0,0,0\n movl $2, range_value(%%rip)\n" ::
                       : "memory");
}

__attribute__((noinline)) void done(int total) {
  printf("trace_loop done: %d\n", total);
}

static void* worker(void* arg) {
  long id = (long)arg;
  for (int k = 0; k < 5; k++)
    probe_me(100 + (int)id, k);
  return NULL;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 10;
  int threads = argc > 2 ? atoi(argv[2]) : 0;
  int total = 0;
  for (int k = 0; k < (int)sizeof big_buffer; k++)
    big_buffer[k] = (unsigned char)(k % 251);
  for (int i = 0; i < n; i++) {
    total += probe_me(i, 3 * i);
    total += step_me(i);
  }
  pthread_t tids[64];
  if (threads > 64)
    threads = 64;
  for (long t = 0; t < threads; t++)
    pthread_create(&tids[t], NULL, worker, (void*)t);
  for (int t = 0; t < threads; t++)
    pthread_join(tids[t], NULL);
  range_line();
  done(total);
  return 0;
}
