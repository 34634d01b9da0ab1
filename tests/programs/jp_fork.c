/* Fork under a jump pad: jp_fork_site (optimised: its first instruction is a 7-byte rip-relative
 * load, a site the jump pad takes) is called CALLS times by the parent, then by a forked child,
 * which reports the first byte of the site as it sees it (0xe9: it inherited the jump) and whether
 * every result was right, then by the parent again after the child's exit. fork_ready() and
 * fork_done() are places for breakpoints. Usage: jp_fork [CALLS] */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

volatile long jp_bias = 5;

__attribute__((noinline, optimize("O2"))) long jp_fork_site(long x) {
  return x + jp_bias;
}

__attribute__((noinline)) void fork_ready(void) {
  __asm__ volatile("");
}

__attribute__((noinline)) void fork_done(void) {
  __asm__ volatile("");
}

static long calls(long n) {
  long bad = 0;
  for (long i = 0; i < n; i++)
    if (jp_fork_site(i) != i + 5)
      bad++;
  return bad;
}

int main(int argc, char** argv) {
  long n = argc > 1 ? atol(argv[1]) : 100;
  fork_ready();
  long bad = calls(n);
  fflush(stdout);
  pid_t child = fork();
  if (child == 0) {
    long child_bad = calls(n);
    printf("child calls=%ld bad=%ld first_byte=0x%02x\n", n, child_bad,
           *(volatile unsigned char*)jp_fork_site);
    fflush(stdout);
    _exit(child_bad ? 1 : 0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  bad += calls(n);
  printf("child exit=%d signal=%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1,
         WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  printf("parent calls=%ld bad=%ld\n", 2 * n, bad);
  fflush(stdout);
  fork_done();
  return 0;
}
