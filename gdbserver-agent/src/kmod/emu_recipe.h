// Emulation recipes for probed instructions (see kmodule/emulate.h): the stub
// decodes the instruction with Zydis and tells gdbtrace.ko how to execute it in
// the uprobe handler, which lets kernels with upstream 4363264111e1 skip the
// out-of-line single-step. The module re-decodes the bytes and refuses a
// recipe that does not match.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "gdbtrace_uapi.h"

namespace gdbtrace::kmod {

// The recipe for the instruction at the start of BYTES, or nullopt when it is
// not one of the emulated forms (the kernel then single-steps it as usual).
std::optional<gdbtrace_emu> make_emu_recipe(std::span<const uint8_t> bytes);

// Whether the running kernel honours a handler that advanced regs->ip (skips
// the single-step). Found by probing a known instruction in a forked child of
// this process through a throw-away /dev/gdbtrace session: the child's
// `add $1,%rdi` runs once if the kernel honours it, twice if not.
bool kernel_honours_emulation();

} // namespace gdbtrace::kmod
