#!/usr/bin/env python3
"""Writes the program and the gdb script of a "thousands of tracepoints" run (issue 30), as a new
user would set one up: N small functions f0..f{N-1}, each a `nop` then `v += K`, called in a loop,
and a gdb script with `trace fK` + `collect v` per function.

    many_functions.py N PROGRAM.c [SCRIPT.gdb]

The program (`PROGRAM ROUNDS [SPAN]`) calls each of the first SPAN functions (default all N) ROUNDS
times (default 1), then done() (a place for a breakpoint), and prints `BENCH many_functions
functions=SPAN rounds=R ns_per_call=X` (the loop's wall time over SPAN*R calls), also left in the
global `bench_ns_per_call` for a debugger stopped in done(). Used by tests/integration/test_bpf_many_tracepoints.py and
tests/qemu/gdb_many.sh; build it with `gcc -O1 -g -fno-inline` (-static for the QEMU guest)."""

import sys


def program_source(functions: int) -> str:
    lines = ["#include <stdio.h>", "#include <stdlib.h>", "#include <time.h>", "volatile long v;",
             "double bench_ns_per_call;"]
    for k in range(functions):
        lines.append(f'__attribute__((noinline)) void f{k}(void) {{ __asm__ volatile("nop"); v += {k}; }}')
    lines += [
        '__attribute__((noinline)) void done(void) { __asm__ volatile(""); }',
        "static void (*const fns[])(void) = {" + ", ".join(f"f{k}" for k in range(functions)) + "};",
        "int main(int argc, char **argv) {",
        "  long rounds = argc > 1 ? atol(argv[1]) : 1, n = sizeof fns / sizeof fns[0];",
        "  if (argc > 2 && atol(argv[2]) > 0 && atol(argv[2]) < n) n = atol(argv[2]);",
        "  struct timespec a, b;",
        "  clock_gettime(CLOCK_MONOTONIC, &a);",
        "  for (long r = 0; r < rounds; r++)",
        "    for (long k = 0; k < n; k++) fns[k]();",
        "  clock_gettime(CLOCK_MONOTONIC, &b);",
        "  double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);",
        "  bench_ns_per_call = rounds ? ns / (n * rounds) : 0.0;",
        '  printf("BENCH many_functions functions=%ld rounds=%ld ns_per_call=%.0f\\n", n, rounds,',
        "         bench_ns_per_call);",
        "  fflush(stdout);",
        "  done();",
        "  return 0;",
        "}",
    ]
    return "\n".join(lines) + "\n"


def gdb_script(functions: int) -> str:
    return "".join(f"trace f{k}\nactions\ncollect v\nend\n" for k in range(functions))


def main(argv):
    if len(argv) not in (3, 4):
        sys.exit(__doc__)
    functions = int(argv[1])
    with open(argv[2], "w") as f:
        f.write(program_source(functions))
    if len(argv) == 4:
        with open(argv[3], "w") as f:
            f.write(gdb_script(functions))


if __name__ == "__main__":
    main(sys.argv)
