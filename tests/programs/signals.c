/* Sends itself SIGUSR1 (handled: handler_hits++) and then SIGUSR2 (handled too), and reports what the
 * handlers saw. With gdb `handle SIGUSR1 nopass` the handler does not run. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

volatile sig_atomic_t usr1_hits;
volatile sig_atomic_t usr2_hits;

void usr1_handler(int sig) { usr1_hits++; }
void usr2_handler(int sig) { usr2_hits++; }

void after_signals(void) {}

int main(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = usr1_handler;
  sigaction(SIGUSR1, &sa, NULL);
  sa.sa_handler = usr2_handler;
  sigaction(SIGUSR2, &sa, NULL);

  kill(getpid(), SIGUSR1);
  kill(getpid(), SIGUSR2);
  after_signals();
  printf("usr1_hits=%d usr2_hits=%d\n", (int)usr1_hits, (int)usr2_hits);
  return 0;
}
