#!/bin/bash
# Builds the guest kernel for `tests/qemu/run.sh noskip`: the debug kernel
# (build_debug_kernel.sh, built first if needed) with upstream 4363264111e1
# taken out of kernel/events/uprobes.c -- the check that skips the
# out-of-line single-step when a uprobe handler moved ip. That is every kernel
# from 6.2 to 6.17 and the stable point releases before the backport: there
# an emulated instruction would run twice, so gdbtrace.ko's load-time
# self-test must turn emulation off (GDBTRACE_FEAT_EMU_DOUBLE) and the guest
# tests check the refused, single-stepped path. A copy of the debug tree
# (objects included), so only uprobes.c and the link are rebuilt; cached in
# tests/qemu/work/noskip. Writes work/noskip/env like fetch_kernels.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
debug=$here/work/debug
work=$here/work/noskip
[ -f "$debug/env" ] || "$here/build_debug_kernel.sh"
src=$work/src
if [ ! -f "$src/Makefile" ] || [ "$debug/src/.config" -nt "$src/.config" ]; then
  rm -rf "$src" && mkdir -p "$work"
  cp -a "$debug/src" "$src"
fi
f=$src/kernel/events/uprobes.c
# Remove the skip (a comment and `if (instruction_pointer(regs) != bp_vaddr) goto out;`).
perl -0pi -e 's/\n\t\/\*\n\t \* If user decided to take execution elsewhere.*?\*\/\n\tif \(instruction_pointer\(regs\) != bp_vaddr\)\n\t\tgoto out;\n//s' "$f"
if grep -q "instruction_pointer(regs) != bp_vaddr" "$f"; then
  echo "noskip: could not take the skip out of $f" >&2
  exit 1
fi
. "$here/kernel_env.sh"
build_kernel_and_env "$src" "$work"
