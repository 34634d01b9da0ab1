/* A SIGALRM that is always pending or being handled: the handler raises the next one, so the chain
 * ends, and abort() runs, the moment one SIGALRM is lost (a debugger that attaches while one is
 * pending must hand it back). As gdb's gdb.threads/attach-into-signal.c, without threads. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

static void action(int sig) {
  raise(SIGALRM);
}

int main(void) {
  struct sigaction act;
  memset(&act, 0, sizeof act);
  act.sa_handler = action;
  act.sa_flags = SA_RESTART;
  sigaction(SIGALRM, &act, NULL);
  raise(SIGALRM);
  abort(); /* only when a SIGALRM was lost */
}
