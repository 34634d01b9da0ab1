// $_siginfo of an i386 process: PTRACE_GETSIGINFO on this 64-bit kernel
// hands out the 64-bit siginfo_t, but gdb reads qXfer:siginfo with the
// inferior's own (compat, 32-bit) layout. The conversion in both directions,
// field by field as gdb's nat/amd64-linux-siginfo.c (which gdbserver uses)
// picks the union member from si_code and si_signo.
#pragma once

#include <signal.h>
#include <string>
#include <string_view>
#include <sys/types.h>

#include "common/result.h"

namespace gdbtrace {

// 128 bytes in the i386 layout.
std::string siginfo_to_compat(const siginfo_t& native);
// DATA (up to 128 bytes, i386 layout) over a zeroed 64-bit siginfo_t.
siginfo_t siginfo_from_compat(std::string_view data);

// The siginfo of stopped thread TID (PTRACE_GETSIGINFO), in the layout gdb
// reads: the i386 one when I386.
Result<std::string> read_thread_siginfo(pid_t tid, bool i386);
// DATA (gdb's bytes, in that layout) over the thread's siginfo (PTRACE_SETSIGINFO).
Result<void> write_thread_siginfo(pid_t tid, bool i386, std::string_view data);

} // namespace gdbtrace
