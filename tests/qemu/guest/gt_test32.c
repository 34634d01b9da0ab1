// 32-bit tracee for gt_safety's test_m32_never_emulated (built -m32 -static):
// prints the address of load_value, waits for a byte on stdin, then calls it
// N times. Its first instruction, `mov value,%ecx` (8b 0d abs32), would decode
// as the emulable `mov disp32(%rip),%ecx` in 64-bit code: the module must not
// emulate it. Exit 0 when every call returned the right value.
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

volatile int value = 0x1234;
int load_value(void);
__asm__(".text\n.globl load_value\n.type load_value,@function\nload_value:\n"
        " movl value,%ecx\n movl %ecx,%eax\n ret\n");

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 100;
  char c;
  printf("%lx\n", (unsigned long)load_value);
  fflush(stdout);
  if (read(0, &c, 1) != 1)
    return 2;
  for (int i = 0; i < n; i++) {
    value = i;
    if (load_value() != i)
      return 3;
  }
  return 0;
}
