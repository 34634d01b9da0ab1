// The server's rows of the packet table (the tracepoint rows are in
// trace_protocol.cc). Single-letter packets match as prefixes: their arguments
// follow the letter directly ("m1000,4", "Hg0").
#include <asio.hpp>

#include "server/gdb_server.h"
#include "trace/trace_engine.h"

namespace gdbtrace {

std::vector<PacketRow> GdbServer::rows() {
  using Match = PacketRow::Match;
  using State = PacketRow::State;
  auto whole = [this](Reply (GdbServer::*f)(std::string_view)) {
    return [this, f](const Packet& p) { return (this->*f)(p.text); };
  };
  auto args = [this](Reply (GdbServer::*f)(std::string_view)) {
    return [this, f](const Packet& p) { return (this->*f)(p.args); };
  };
  auto none = [this](Reply (GdbServer::*f)()) {
    return [this, f](const Packet&) { return (this->*f)(); };
  };
  std::vector<PacketRow> rows = {
      // --- execution and processes (handlers_exec.cc)
      {"?", Match::Prefix, false, "", {}, none(&GdbServer::handle_status)},
      {"!",
       Match::Prefix,
       false,
       "",
       {},
       [this](const Packet&) {
         extended_ = true;
         return Reply("OK");
       }},
      {"c", Match::Prefix, false, "", {}, whole(&GdbServer::handle_legacy_resume)},
      {"C", Match::Prefix, false, "", {}, whole(&GdbServer::handle_legacy_resume)},
      {"s", Match::Prefix, false, "", {}, whole(&GdbServer::handle_legacy_resume)},
      {"S", Match::Prefix, false, "", {}, whole(&GdbServer::handle_legacy_resume)},
      {"vCont?",
       Match::Exact,
       false,
       "vContSupported+",
       {},
       [](const Packet&) { return Reply("vCont;c;C;s;S;t;r"); }},
      {"vCont;", Match::Prefix, false, "", {}, whole(&GdbServer::handle_vcont)},
      {"vStopped", Match::Exact, false, "", {}, none(&GdbServer::handle_vstopped)},
      {"vCtrlC", Match::Exact, false, "", {}, none(&GdbServer::handle_ctrl_c)},
      {"vRun;", Match::Prefix, false, "", {}, whole(&GdbServer::handle_vrun)},
      {"vAttach;", Match::Prefix, false, "", {}, whole(&GdbServer::handle_vattach)},
      {"vKill;", Match::Prefix, false, "", {}, whole(&GdbServer::handle_vkill)},
      {"k", Match::Prefix, false, "", {}, none(&GdbServer::handle_kill)},
      {"R", Match::Prefix, false, "", {}, none(&GdbServer::handle_restart)},
      {"D", Match::Prefix, false, "", {}, whole(&GdbServer::handle_detach)},
      {"H", Match::Prefix, false, "", {}, whole(&GdbServer::handle_set_thread)},
      {"T", Match::Prefix, false, "", {}, whole(&GdbServer::handle_thread_alive)},

      // --- registers, memory, breakpoints (handlers_state.cc)
      {"g", Match::Prefix, false, "", State::Reads, none(&GdbServer::handle_read_registers)},
      {"G", Match::Prefix, false, "", State::Writes, whole(&GdbServer::handle_write_registers)},
      {"p", Match::Prefix, false, "", State::Reads, whole(&GdbServer::handle_read_register)},
      {"P", Match::Prefix, false, "", State::Writes, whole(&GdbServer::handle_write_register)},
      {"m", Match::Prefix, false, "", State::Reads, whole(&GdbServer::handle_read_memory)},
      {"M", Match::Prefix, false, "", State::Writes,
       [this](const Packet& p) { return handle_write_memory(p.text, false); }},
      {"X", Match::Prefix, false, "", State::Writes,
       [this](const Packet& p) { return handle_write_memory(p.text, true); }},
      {"Z",
       Match::Prefix,
       false,
       "ConditionalBreakpoints+;BreakpointCommands+",
       {},
       whole(&GdbServer::handle_breakpoint)},
      {"z", Match::Prefix, false, "", {}, whole(&GdbServer::handle_breakpoint)},

      // --- files on the target (vfile.cc): raw bytes in pread replies
      {"vFile:", Match::Prefix, true, "", {}, args(&GdbServer::handle_vfile)},

      // --- queries (handlers_query.cc)
      {"qSupported", Match::Prefix, false, "", {}, whole(&GdbServer::handle_qsupported)},
      {"qC", Match::Exact, false, "", {}, none(&GdbServer::handle_current_thread)},
      {"qfThreadInfo",
       Match::Exact,
       false,
       "",
       {},
       [this](const Packet&) { return handle_thread_info(true); }},
      {"qsThreadInfo",
       Match::Exact,
       false,
       "",
       {},
       [this](const Packet&) { return handle_thread_info(false); }},
      {"qAttached", Match::Prefix, false, "", {}, args(&GdbServer::handle_attached)},
      {"qSymbol:",
       Match::Prefix,
       false,
       "",
       {},
       [](const Packet&) { return Reply("OK"); }}, // we look up no symbols
      {"qRcmd,", Match::Prefix, false, "", {}, args(&GdbServer::handle_rcmd)},
      {"qXfer:siginfo:write:",
       Match::Prefix,
       false,
       "qXfer:siginfo:write+",
       {},
       args(&GdbServer::handle_siginfo_write)},

      // --- settings (handlers_settings.cc)
      {"QStartNoAckMode",
       Match::Exact,
       false,
       "QStartNoAckMode+",
       {},
       none(&GdbServer::handle_no_ack_mode)},
      {"QNonStop:", Match::Prefix, false, "QNonStop+", {}, args(&GdbServer::handle_non_stop)},
      {"QPassSignals:",
       Match::Prefix,
       false,
       "QPassSignals+",
       {},
       args(&GdbServer::handle_pass_signals)},
      {"QProgramSignals:",
       Match::Prefix,
       false,
       "QProgramSignals+",
       {},
       args(&GdbServer::handle_program_signals)},
      {"QStartupWithShell:",
       Match::Prefix,
       false,
       "QStartupWithShell+",
       {},
       args(&GdbServer::handle_startup_with_shell)},
      {"QDisableRandomization:",
       Match::Prefix,
       false,
       "QDisableRandomization+",
       {},
       args(&GdbServer::handle_disable_randomization)},
      {"QEnvironmentHexEncoded:",
       Match::Prefix,
       false,
       "QEnvironmentHexEncoded+",
       {},
       args(&GdbServer::handle_environment_set)},
      {"QEnvironmentUnset:",
       Match::Prefix,
       false,
       "QEnvironmentUnset+",
       {},
       args(&GdbServer::handle_environment_unset)},
      {"QEnvironmentReset",
       Match::Exact,
       false,
       "QEnvironmentReset+",
       {},
       none(&GdbServer::handle_environment_reset)},
      {"QSetWorkingDir:",
       Match::Prefix,
       false,
       "QSetWorkingDir+",
       {},
       args(&GdbServer::handle_working_dir)},
      {"QThreadEvents:",
       Match::Prefix,
       false,
       "QThreadEvents+",
       {},
       args(&GdbServer::handle_thread_events)},
      {"QCatchSyscalls:",
       Match::Prefix,
       false,
       "QCatchSyscalls+",
       {},
       args(&GdbServer::handle_catch_syscalls)},
  };
  for (auto& row : xfer_rows())
    rows.push_back(std::move(row));
  return rows;
}

// qXfer:OBJECT:read:ANNEX:OFFSET,LENGTH, one row per object we serve. Replies
// are 'm'/'l' + raw document bytes.
std::vector<PacketRow> GdbServer::xfer_rows() {
  using Match = PacketRow::Match;
  auto read = [this](const Packet& p) { return handle_qxfer(p.text); };
  std::vector<PacketRow> rows = {
      {"qXfer:features:read:", Match::Prefix, true, "qXfer:features:read+", {}, read},
      {"qXfer:threads:read:", Match::Prefix, true, "qXfer:threads:read+", {}, read},
      {"qXfer:exec-file:read:", Match::Prefix, true, "qXfer:exec-file:read+", {}, read},
      {"qXfer:auxv:read:", Match::Prefix, true, "qXfer:auxv:read+", {}, read},
      {"qXfer:libraries-svr4:read:", Match::Prefix, true, "qXfer:libraries-svr4:read+", {}, read},
      {"qXfer:siginfo:read:", Match::Prefix, true, "qXfer:siginfo:read+", {}, read},
  };
  if (engine_)
    rows.push_back({"qXfer:traceframe-info:read:", Match::Prefix, true,
                    "qXfer:traceframe-info:read+", PacketRow::State::Reads, read});
  return rows;
}

} // namespace gdbtrace
