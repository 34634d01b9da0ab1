/* A global written (bump_counter) and read (read_counter) in a loop: for watch / rwatch / awatch. */
#include <stdio.h>

volatile int counter;
volatile int observed;
int untouched = 5;

void bump_counter(int by) { counter += by; }
int read_counter(void) { return counter; }

int main(void) {
  for (int i = 1; i <= 5; i++) {
    bump_counter(i);
    observed = read_counter() + untouched;
  }
  printf("counter=%d observed=%d\n", counter, observed);
  return 0;
}
