#include "server/stop_reply.h"

#include <cstdio>

#include "common/hex.h"
#include "server/packet_parsers.h"
#include "server/signals.h"

namespace gdbtrace {

static std::string two_hex(int v) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%02x", v & 0xff);
  return buf;
}

bool is_process_exit(const StopEvent& event) {
  return event.kind == StopKind::Exited || event.kind == StopKind::Terminated;
}

static std::string expedited(const StopReplyOptions& o) {
  if (!o.regs)
    return {};
  std::string out;
  // The frame registers gdbserver expedites, in the process's own numbering.
  const RegisterLayout& l = o.layout;
  static constexpr unsigned kI386[] = {GT32_EBP, GT32_ESP, GT32_EIP};
  static constexpr unsigned kAmd64[] = {GT_RBP, GT_RSP, GT_RIP};
  for (unsigned r : l.i386() ? kI386 : kAmd64) {
    if (!l.valid(*o.regs, r))
      continue;
    uint8_t value[8];
    l.get(*o.regs, r, value);
    out += two_hex(static_cast<int>(r)) + ":" +
           hex::encode(std::span<const uint8_t>(value, l.size(r))) + ";";
  }
  return out;
}

static std::string reason_text(const StopEvent& e, const StopReplyOptions& o) {
  switch (e.kind) {
  case StopKind::Forked:
    return "fork:" + format_thread_id(e.child, o.multiprocess) + ";";
  case StopKind::VForked:
    return "vfork:" + format_thread_id(e.child, o.multiprocess) + ";";
  case StopKind::VForkDone:
    return "vforkdone:;";
  case StopKind::Execd:
    return "exec:" + hex::encode(e.exec_path) + ";";
  case StopKind::ThreadCreated:
    return "create:;";
  case StopKind::SyscallEntry:
    return "syscall_entry:" + hex::u64(static_cast<uint64_t>(e.syscall_number)) + ";";
  case StopKind::SyscallReturn:
    return "syscall_return:" + hex::u64(static_cast<uint64_t>(e.syscall_number)) + ";";
  default:
    break;
  }
  switch (e.reason) {
  case StopReason::SwBreak:
    return o.swbreak ? "swbreak:;" : "";
  case StopReason::HwBreak:
    return o.hwbreak ? "hwbreak:;" : "";
  case StopReason::Watch:
    return "watch:" + hex::u64(e.watch_address) + ";";
  case StopReason::RWatch:
    return "rwatch:" + hex::u64(e.watch_address) + ";";
  case StopReason::AWatch:
    return "awatch:" + hex::u64(e.watch_address) + ";";
  default:
    return "";
  }
}

std::string format_stop_reply(const StopEvent& e, const StopReplyOptions& o) {
  std::string process =
      o.multiprocess ? ";process:" + hex::u64(static_cast<uint64_t>(e.thread.pid)) : "";
  switch (e.kind) {
  case StopKind::Exited:
    return "W" + two_hex(e.exit_status) + process;
  case StopKind::Terminated:
    return "X" + two_hex(gdb_signal_from_host(e.signal)) + process;
  case StopKind::ThreadExited:
    return "w" + two_hex(e.exit_status) + ";" + format_thread_id(e.thread, o.multiprocess);
  case StopKind::NoResumed:
    return "N";
  default:
    break;
  }
  // Fork/exec/clone/syscall events are reported with SIGTRAP, as gdbserver does.
  int sig = e.kind == StopKind::Signalled ? gdb_signal_from_host(e.signal) : 5;
  std::string out = "T" + two_hex(sig) + reason_text(e, o) + expedited(o);
  out += "thread:" + format_thread_id(e.thread, o.multiprocess) + ";";
  if (o.core >= 0)
    out += "core:" + hex::u64(static_cast<uint64_t>(o.core)) + ";";
  return out;
}

} // namespace gdbtrace
