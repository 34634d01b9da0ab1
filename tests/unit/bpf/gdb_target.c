/* Compiled -O0 -g: the gdb-bytecode tests ask gdb (`maint agent -at
 * bpf_gdb_target, EXPR`) for the bytecode of expressions over these locals,
 * arguments and globals, then run it in the kernel and in the VM. */
#include <stdint.h>

struct gdb_rec {
  int a;
  long b;
  char name[12];
  short arr[5];
};

struct gdb_rec gdb_global = {7, -123456789012L, "probe me", {1, -2, 3, -4, 5}};
int gdb_ints[6] = {10, 20, 30, 40, 50, 60};
int* gdb_ptr = gdb_ints + 2;
const char* gdb_str = "hello, tracer";
unsigned char gdb_bytes[4] = {0xff, 0x80, 0x7f, 0x01};

long bpf_gdb_target(int x, long y, struct gdb_rec* r) {
  int local = x * 3;
  long sum = local + y + r->a;
  return sum;
}
