// Formatting of the agent-expression `printf` opcode (gdb's dprintf/agent printf):
// a C format string with 64-bit integer arguments; %s arguments are addresses
// of strings read from the tracee.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "common/result.h"

namespace gdbtrace {

// READ_STRING reads the NUL-terminated string at an address (bounded by the caller).
Result<std::string> agent_printf(std::string_view format, std::span<const uint64_t> args,
                                 const std::function<Result<std::string>(uint64_t)>& read_string);

} // namespace gdbtrace
