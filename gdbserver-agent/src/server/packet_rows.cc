// The server's rows of the packet table (the tracepoint rows are in
// trace_protocol.cc). Single-letter packets match as prefixes: their arguments
// follow the letter directly ("m1000,4", "Hg0").
#include <asio.hpp>

#include "server/gdb_server.h"
#include "trace/trace_engine.h"

namespace gdbtrace {

std::vector<PacketRow> GdbServer::rows() {
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
      PacketRow::prefix("?", none(&GdbServer::handle_status)),
      PacketRow::prefix("!",
                        [this](const Packet&) {
                          extended_ = true;
                          return Reply("OK");
                        }),
      PacketRow::prefix("c", whole(&GdbServer::handle_legacy_resume)),
      PacketRow::prefix("C", whole(&GdbServer::handle_legacy_resume)),
      PacketRow::prefix("s", whole(&GdbServer::handle_legacy_resume)),
      PacketRow::prefix("S", whole(&GdbServer::handle_legacy_resume)),
      PacketRow::exact("vCont?", [](const Packet&) { return Reply("vCont;c;C;s;S;t;r"); })
          .advertise("vContSupported+"),
      PacketRow::prefix("vCont;", whole(&GdbServer::handle_vcont)),
      PacketRow::exact("vStopped", none(&GdbServer::handle_vstopped)),
      PacketRow::exact("vCtrlC", none(&GdbServer::handle_ctrl_c)),
      PacketRow::prefix("vRun;", whole(&GdbServer::handle_vrun)),
      PacketRow::prefix("vAttach;", whole(&GdbServer::handle_vattach)),
      PacketRow::prefix("vKill;", whole(&GdbServer::handle_vkill)),
      PacketRow::prefix("k", none(&GdbServer::handle_kill)),
      PacketRow::prefix("R", none(&GdbServer::handle_restart)),
      PacketRow::prefix("D", whole(&GdbServer::handle_detach)),
      PacketRow::prefix("H", whole(&GdbServer::handle_set_thread)),
      PacketRow::prefix("T", whole(&GdbServer::handle_thread_alive)),

      // --- registers, memory, breakpoints (handlers_state.cc)
      PacketRow::prefix("g", none(&GdbServer::handle_read_registers)).reads_state(),
      PacketRow::prefix("G", whole(&GdbServer::handle_write_registers)).writes_state(),
      PacketRow::prefix("p", whole(&GdbServer::handle_read_register)).reads_state(),
      PacketRow::prefix("P", whole(&GdbServer::handle_write_register)).writes_state(),
      PacketRow::prefix("m", whole(&GdbServer::handle_read_memory)).reads_state(),
      PacketRow::prefix("M", [this](const Packet& p) { return handle_write_memory(p.text, false); })
          .writes_state(),
      PacketRow::prefix("X", [this](const Packet& p) { return handle_write_memory(p.text, true); })
          .binary_data("E.memory write length mismatch")
          .writes_state(),
      PacketRow::prefix("Z", whole(&GdbServer::handle_breakpoint))
          .advertise("ConditionalBreakpoints+;BreakpointCommands+"),
      PacketRow::prefix("z", whole(&GdbServer::handle_breakpoint)),

      // --- queries (handlers_query.cc)
      PacketRow::prefix("qSupported", whole(&GdbServer::handle_qsupported)),
      PacketRow::exact("qC", none(&GdbServer::handle_current_thread)),
      PacketRow::exact("qfThreadInfo", [this](const Packet&) { return handle_thread_info(true); }),
      PacketRow::exact("qsThreadInfo", [this](const Packet&) { return handle_thread_info(false); }),
      PacketRow::prefix("qAttached", args(&GdbServer::handle_attached)),
      PacketRow::prefix("qGetTLSAddr:", args(&GdbServer::handle_get_tls_addr)),
      PacketRow::prefix("qSymbol:",
                        [](const Packet&) { return Reply("OK"); }), // we look up no symbols
      PacketRow::prefix("qRcmd,", args(&GdbServer::handle_rcmd)),

      // --- settings (handlers_settings.cc)
      PacketRow::exact("QStartNoAckMode", none(&GdbServer::handle_no_ack_mode))
          .advertise("QStartNoAckMode+"),
      PacketRow::prefix("QNonStop:", flag_setting("QNonStop",
                                                  [this](bool on) {
                                                    non_stop_ = on;
                                                    target_.set_non_stop(on);
                                                    pending_stops_.clear();
                                                  }))
          .advertise("QNonStop+"),
      PacketRow::prefix("QPassSignals:", signal_setting([this](std::vector<bool> list) {
                          target_.set_pass_signals(list);
                        }))
          .advertise("QPassSignals+"),
      PacketRow::prefix("QProgramSignals:", signal_setting([this](std::vector<bool> list) {
                          target_.set_program_signals(list);
                          program_signals_ = std::move(list);
                        }))
          .advertise("QProgramSignals+"),
      PacketRow::prefix("QStartupWithShell:",
                        flag_setting("QStartupWithShell",
                                     [this](bool on) { options_.launch.startup_with_shell = on; }))
          .advertise("QStartupWithShell+"),
      PacketRow::prefix(
          "QDisableRandomization:",
          flag_setting("QDisableRandomization",
                       [this](bool on) { options_.launch.disable_randomization = on; }))
          .advertise("QDisableRandomization+"),
      PacketRow::prefix("QEnvironmentHexEncoded:", args(&GdbServer::handle_environment_set))
          .advertise("QEnvironmentHexEncoded+"),
      PacketRow::prefix("QEnvironmentUnset:", args(&GdbServer::handle_environment_unset))
          .advertise("QEnvironmentUnset+"),
      PacketRow::exact("QEnvironmentReset", none(&GdbServer::handle_environment_reset))
          .advertise("QEnvironmentReset+"),
      PacketRow::prefix("QSetWorkingDir:", args(&GdbServer::handle_working_dir))
          .advertise("QSetWorkingDir+"),
      PacketRow::prefix(
          "QThreadEvents:",
          flag_setting("QThreadEvents", [this](bool on) { target_.set_report_thread_events(on); }))
          .advertise("QThreadEvents+"),
      PacketRow::prefix("QCatchSyscalls:", args(&GdbServer::handle_catch_syscalls))
          .advertise("QCatchSyscalls+"),
  };
  // --- files on the target (vfile.cc)
  for (auto& row : vfile_.rows())
    rows.push_back(std::move(row));
  for (auto& row : xfer_rows())
    rows.push_back(std::move(row));
  return rows;
}

} // namespace gdbtrace
