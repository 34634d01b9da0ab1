// Starting a program under ptrace the way gdbserver's fork_inferior +
// startup_inferior do: fork, PTRACE_TRACEME, exec through $SHELL and/or the
// --wrapper, then let the intermediate execs pass until the program itself
// has exec'd and sits at its first instruction.
#pragma once

#include <signal.h>
#include <string>
#include <sys/types.h>
#include <vector>

#include "common/result.h"
#include "target/native_target.h"

namespace gdbtrace {

// CHILD_SIGMASK: the signal mask the program starts with (the server blocks
// SIGCHLD for its signalfd; the program must not inherit that).
Result<pid_t> launch_inferior(const LaunchSpec& spec, const sigset_t& child_sigmask);

// launch_inferior hands the terminal on the stub's stderr (if it is one) to the
// program it started (its foreground process group, as gdbserver does); this
// gives it back to the group that had it before the first program. It runs at
// exit; main calls it too before it re-raises a terminating signal.
void restore_terminal_foreground();

// The "exec ..." command line gdbserver hands to the shell (exposed for tests).
std::string shell_command_line(const LaunchSpec& spec);

} // namespace gdbtrace
