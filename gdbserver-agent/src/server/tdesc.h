// The target description gdb reads with qXfer:features:read:target.xml.
//
// One self-contained document (no xi:include) whose registers are in exactly
// the order of the process's layout (abi/amd64_regs.h, or abi/i386_regs.h for
// a 32-bit process), with explicit regnum attributes, so the 'g' packet
// layout, trace-frame 'R' blocks and gdb's view always agree.
#pragma once

#include <string>
#include <vector>

#include "common/register_layout.h"

namespace gdbtrace {

// PRESENT (empty: all): registers a saved trace file holds. Those it lacks get
// remote numbers after all the others, so they fall beyond the file's shorter
// 'R' blocks and gdb's tfile reader shows them as <unavailable>, not as 0.
std::string target_xml(const RegisterLayout& layout, const std::vector<bool>& present = {});

// The registers PRESENT names that gdb 13 still cannot show from such a file:
// its tfile reader (tracefile-tfile.c, tfile_target::fetch_registers) walks
// the registers in gdb's own order (amd64: core, x87, SSE, AVX, fs_base and
// gs_base, orig_rax last) and stops at the first one beyond the 'R' block, so
// a register after an absent one reads <unavailable> even though the file
// holds it (kernel collectors' frames lack ds/es/fs/gs, so their $fs_base).
std::vector<std::string> registers_tfile_cannot_show(bool with_avx,
                                                     const std::vector<bool>& present);

} // namespace gdbtrace
