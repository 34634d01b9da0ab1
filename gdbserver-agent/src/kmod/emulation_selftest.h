// Whether gdbtrace.ko's instruction emulation is safe on the running kernel.
// The module decodes each probed instruction itself (shared/x86/emulate.c) and,
// when asked with GDBTRACE_PROBE_EMULATE, executes it in the uprobe handler;
// that is only right where the kernel then skips its out-of-line single-step
// (upstream 4363264111e1), which this self-test checks once per session.
#pragma once

namespace gdbtrace::kmod {

// Whether the running kernel honours a handler that advanced regs->ip (skips
// the single-step). Found by probing a known instruction in a forked, ptraced
// child of this process through a throw-away /dev/gdbtrace session: the
// child's `add $1,%rdi` runs once if the kernel honours it, twice if not.
bool kernel_honours_emulation();

} // namespace gdbtrace::kmod
