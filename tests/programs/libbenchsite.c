/* Shared-library probe site for bench_work (dlopen'ed): the "shared-library function" workload.
 * Written in assembly so the site is the same as bench_work's emulated sites whatever the -O level:
 * `nop` (emulated by the kernel at a uprobe), then a 7-byte rip-relative mov at +1 (long enough for
 * a gdb fast tracepoint's jump). lib_site(a, b, p) adds a to lib_sink. */
long lib_sink;

__asm__(".text\n"
        ".globl lib_site\n"
        ".type lib_site, @function\n"
        "lib_site:\n"
        "  nop\n"
        "  movq lib_sink@GOTPCREL(%rip), %rax\n"
        "  addq %rdi, (%rax)\n"
        "  ret\n"
        ".size lib_site, .-lib_site\n");
