// The target description gdb reads with qXfer:features:read:target.xml.
//
// One self-contained document (no xi:include) whose registers are in exactly
// the order of abi/amd64_regs.h, with explicit regnum attributes, so the 'g'
// packet layout, trace-frame 'R' blocks and gdb's view always agree.
#pragma once

#include <string>

namespace gdbtrace {

std::string target_xml(bool with_avx);

} // namespace gdbtrace
