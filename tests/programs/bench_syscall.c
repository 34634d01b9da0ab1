/* One system call, the unit the jump pad is judged in (bench/jumppad.sh; as the anchors'
 * syscall_cost.c): N getppid() system calls, ns per call. Usage: bench_syscall [n (default
 * 2000000)] */
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char** argv) {
  long n = argc > 1 ? atol(argv[1]) : 2000000;
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (long i = 0; i < n; i++)
    syscall(SYS_getppid);
  clock_gettime(CLOCK_MONOTONIC, &b);
  double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
  printf("n=%ld ns_per_iter=%.1f\n", n, ns / n);
  return 0;
}
