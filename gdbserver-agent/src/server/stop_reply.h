// Formats target events as RSP stop replies (T/S, W, X, w, N).
#pragma once

#include <optional>
#include <string>

#include "common/register_block.h"
#include "target/native_target.h"

namespace gdbtrace {

struct StopReplyOptions {
  bool multiprocess = false;
  bool swbreak = false; // gdb announced swbreak+ (else the reason is omitted)
  bool hwbreak = false;
  const RegisterBlock* regs = nullptr; // expedited registers (rbp, rsp, rip) when known
  RegisterLayout layout;               // the stopped process's: numbers and sizes of those
  int core = -1;
};

std::string format_stop_reply(const StopEvent& event, const StopReplyOptions& options);
// True for events after which the process is gone (W/X).
bool is_process_exit(const StopEvent& event);

} // namespace gdbtrace
