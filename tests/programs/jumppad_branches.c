/* Tracepoint sites whose instruction is a branch, for the jump pad
 * (tests/integration/test_jumppad_branches.py): jp_branches(x) reaches jp_leaf
 * through a `call rel32` (at jp_call_site) and through a pointer (`call
 * *jp_leaf_ptr(%rip)` at jp_got_site), and has a `jne rel32` (jp_jcc_site) and
 * a `jmp rel32` (jp_jmp_site), written in assembly so the forms are exact.
 * jp_branches(x) = 4x + 1, plus 100 for an even x. Usage: jumppad_branches [N];
 * prints "BRANCHES n=N sum=S". */
#include <stdio.h>
#include <stdlib.h>

long jp_leaf(long x) {
  return 2 * x;
}

long (*volatile jp_leaf_ptr)(long) = jp_leaf;

long jp_branches(long x);
__asm__(".text\n"
        ".globl jp_branches\n"
        ".type jp_branches, @function\n"
        "jp_branches:\n"
        "  .cfi_startproc\n"
        "  push %rbx\n"
        "  .cfi_def_cfa_offset 16\n"
        "  .cfi_offset rbx, -16\n"
        "  push %r12\n"
        "  .cfi_def_cfa_offset 24\n"
        "  .cfi_offset r12, -24\n"
        "  sub $8, %rsp\n"
        "  .cfi_def_cfa_offset 32\n"
        "  mov %rdi, %rbx\n"
        ".globl jp_call_site\n"
        "jp_call_site:\n"
        "  call jp_leaf\n" /* e8 rel32 */
        "  lea 1(%rax), %r12\n"
        "  test $1, %bl\n"
        ".globl jp_jcc_site\n"
        "jp_jcc_site:\n"
        "  .byte 0x0f, 0x85\n" /* jne rel32 */
        "  .long 1f - . - 4\n"
        "  add $100, %r12\n"
        "1:\n"
        "  mov %rbx, %rdi\n"
        ".globl jp_got_site\n"
        "jp_got_site:\n"
        "  call *jp_leaf_ptr(%rip)\n" /* ff 15 disp32 */
        "  add %r12, %rax\n"
        ".globl jp_jmp_site\n"
        "jp_jmp_site:\n"
        "  .byte 0xe9\n" /* jmp rel32 */
        "  .long 2f - . - 4\n"
        "  ud2\n"
        "2:\n"
        "  add $8, %rsp\n"
        "  .cfi_def_cfa_offset 24\n"
        "  pop %r12\n"
        "  .cfi_def_cfa_offset 16\n"
        "  pop %rbx\n"
        "  .cfi_def_cfa_offset 8\n"
        "  ret\n"
        "  .cfi_endproc\n"
        ".size jp_branches, . - jp_branches\n");

__attribute__((noinline)) void jp_done(void) {
  __asm__ volatile("");
}

int main(int argc, char** argv) {
  long n = argc > 1 ? atol(argv[1]) : 10, sum = 0;
  for (long i = 0; i < n; i++)
    sum += jp_branches(i);
  printf("BRANCHES n=%ld sum=%ld\n", n, sum);
  fflush(stdout);
  jp_done();
  return 0;
}
