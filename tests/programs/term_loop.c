/* Sets its terminal's modes in a loop, as gdb.multi/multi-term-settings.c: every ~100 ms it prints
 * "pid=P, count=N" and does tcgetattr + tcsetattr on stdin, which raises SIGTTOU when its process
 * group is not the terminal's foreground group (nothing happens when stdin is not a terminal).
 * Usage: term_loop [seconds to run (default 60)] */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

volatile long count;

int main(int argc, char **argv) {
  signal(SIGTTOU, SIG_DFL); /* in case it was inherited ignored */
  time_t end = time(NULL) + (argc > 1 ? atol(argv[1]) : 60);
  while (time(NULL) < end) {
    struct termios modes;
    printf("pid=%ld, count=%ld\n", (long)getpid(), count++);
    fflush(stdout);
    if (tcgetattr(0, &modes) == 0) tcsetattr(0, TCSANOW, &modes);
    usleep(100000);
  }
  return 0;
}
