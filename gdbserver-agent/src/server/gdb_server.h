// The protocol engine: turns gdb's packets into NativeTarget / TraceEngine
// calls and target events into stop replies.
//
// One GdbServer lives for the whole run; connections come and go (--multi,
// reconnects). Every packet is a row of one PacketTable (packet_rows.cc; the
// tracepoint rows come from TraceProtocol); handlers live in handlers_*.cc,
// grouped by subject, and return the reply payload, or std::nullopt when the
// reply comes later (a resume in all-stop mode answers with the next stop reply).
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "rsp/connection.h"
#include "server/breakpoints.h"
#include "server/osdata.h"
#include "server/packet_table.h"
#include "server/state_source.h"
#include "server/vfile.h"
#include "target/native_target.h"

namespace asio {
class io_context;
}

namespace gdbtrace {

class TraceEngine;
class TraceProtocol;

struct ServerOptions {
  bool multi = false;
  bool debug = false;
  bool remote_debug = false;
  bool stdio_connection = false; // inferiors get /dev/null and stderr as stdin/stdout
  LaunchSpec launch;             // program/args from the command line, wrapper, shell, ...
};

struct XferRequest;

class GdbServer {
public:
  static constexpr size_t kPacketSize = 0x4000;

  GdbServer(asio::io_context& io, NativeTarget& target, TraceEngine* engine, ServerOptions options);
  ~GdbServer();

  // Starts PROGRAM from the command line / attaches (before gdb connects).
  Result<Pid> start_program();
  Result<void> attach_initial(Pid pid);

  void attach_connection(std::shared_ptr<rsp::Connection> connection);
  // Whether gdb's connection is over: already closed (on_connection_closed is
  // posted, not yet run), or gdb closed its end and the stub had not read that
  // yet (then it is ended now, as if read). False while gdb is there.
  bool connection_over();
  // Called after the connection closed; tells main whether to serve again.
  std::function<void()> on_connection_closed;
  bool exit_requested() const { return exit_requested_; }
  bool extended() const { return extended_; }
  bool has_processes() const { return !target_.processes().empty(); }
  // An in-kernel collector is about to probe ADDRESS: a software breakpoint of
  // gdb's there moves into a debug register (TraceEngine::Hooks::before_kernel_probe).
  Result<void> make_room_for_kernel_probe(Pid pid, uint64_t address);
  // Kills the processes we started and detaches from attached ones (server exit).
  void detach_or_kill_all();

  // Text for gdb's console ('O' packets when gdb can take them, else queued).
  void console(const std::string& text);
  Pid current_pid() const;
  void set_debug(bool on) { options_.debug = on; }

private:
  using Reply = gdbtrace::Reply;

  // packet_rows.cc: the packet table
  std::vector<PacketRow> rows();
  // xfer_objects.cc: the qXfer objects, one row each
  using XferReader = std::function<Result<std::string>(const XferRequest& req)>;
  std::vector<PacketRow> xfer_rows();
  PacketRow xfer_read_row(std::string_view name, std::string_view feature, XferReader read);
  Result<Pid> xfer_process() const;
  Reply handle_qxfer(std::string_view packet, const XferReader& read);
  Reply handle_siginfo_write(std::string_view args);

  // gdb_server.cc: processes we start, dispatch, connection state, events
  Result<Pid> launch(const LaunchSpec& spec);
  // A new or attached process is reported to gdb as stopped by SIGTRAP.
  StopEvent record_initial_stop(Pid pid);
  void on_packet(std::string_view packet);
  void on_interrupt();
  void on_disconnect();
  // The server's part of every dispatch (PacketTable::Around).
  Reply around_handler(const PacketRow& row, const std::function<Reply()>& run);
  // What g/p/m and traceframe-info read during the current packet (set by around_handler).
  StateSource& state() { return *state_; }
  void send(std::string_view payload);
  void on_target_event(const StopEvent& event);
  bool filter_conditional_breakpoint(const StopEvent& event);
  void report_stop(const StopEvent& event);
  std::string stop_reply(const StopEvent& event);
  void flush_console();
  void debug(const std::string& text) const;
  // ENDED: how the process ended ("exited with code 0"), "" when gdb detached.
  void forget_process(Pid pid, const std::string& ended);
  ThreadId resolve_thread(ThreadId thread) const;
  ThreadId general_thread() const;
  // The register layout of the current process (its architecture, AVX or not).
  RegisterLayout register_layout() const;

  // handlers_query.cc: q queries, monitor commands
  Reply handle_qsupported(std::string_view packet);
  Reply handle_current_thread();
  Reply handle_attached(std::string_view packet);
  Reply handle_get_tls_addr(std::string_view args);
  Reply handle_thread_info(bool first);
  Reply handle_rcmd(std::string_view packet);

  // handlers_settings.cc: Q settings. Flags ("0"/"1") and signal lists are
  // parsed by the handler these make; APPLY gets the value.
  static PacketHandler flag_setting(std::string packet, std::function<void(bool)> apply);
  static PacketHandler signal_setting(std::function<void(std::vector<bool>)> apply);
  Reply handle_no_ack_mode();
  Reply handle_environment_set(std::string_view hex_var);
  Reply handle_environment_unset(std::string_view hex_name);
  Reply handle_environment_reset();
  Reply handle_working_dir(std::string_view hex_dir);
  Reply handle_catch_syscalls(std::string_view args);

  // handlers_exec.cc: running, stopping, processes
  Reply handle_status();
  Reply handle_vcont(std::string_view packet);
  Reply handle_legacy_resume(std::string_view packet);
  Reply resume(std::vector<ResumeAction> actions);
  void leave_queued_stops(std::vector<ResumeAction>& actions) const;
  Reply handle_vstopped();
  Reply handle_vrun(std::string_view packet);
  Reply handle_vattach(std::string_view packet);
  Reply handle_vkill(std::string_view packet);
  Reply handle_ctrl_c();
  Reply handle_kill();
  Reply handle_restart();
  Reply handle_detach(std::string_view packet);
  Reply handle_set_thread(std::string_view packet);
  Reply handle_thread_alive(std::string_view packet);

  // handlers_state.cc: registers, memory, breakpoints (reads through state(); the
  // table refuses writes while a trace frame is selected)
  Reply handle_read_registers();
  Reply handle_write_registers(std::string_view packet);
  Reply handle_read_register(std::string_view packet);
  Reply handle_write_register(std::string_view packet);
  Reply handle_read_memory(std::string_view packet);
  Reply handle_write_memory(std::string_view packet, bool binary);
  Reply handle_breakpoint(std::string_view packet);

  asio::io_context& io_;
  NativeTarget& target_;
  TraceEngine* engine_;
  ServerOptions options_;
  std::shared_ptr<rsp::Connection> conn_;
  OsDataSnapshots osdata_; // qXfer:osdata (info os)
  VFileServer vfile_;
  BreakpointTable breakpoints_;
  std::unique_ptr<TraceProtocol> trace_; // null without a trace engine
  PacketTable packets_;
  StateSource* state_ = nullptr; // during a packet whose row reads state

  // Per-connection protocol state (reset on connect).
  std::set<std::string> gdb_features_;
  bool multiprocess_ = false;
  bool extended_ = false;
  bool non_stop_ = false;
  // gdb reads 'O' packets now: qRcmd, or a row marked prints_console().
  bool console_open_ = false;
  bool exit_requested_ = false;
  ThreadId general_thread_{0, 0};
  ThreadId cont_thread_{0, 0};
  std::vector<std::string> thread_list_; // qfThreadInfo/qsThreadInfo paging

  // Execution state.
  bool waiting_for_stop_ = false;            // all-stop: a resume awaits its stop reply
  std::vector<ResumeAction> last_resume_;    // replayed when a condition is false
  std::optional<StopEvent> last_stop_;       // what '?' reports in all-stop
  std::deque<StopEvent> pending_stops_;      // non-stop: %Stop notification queue
  std::set<Pid> stopped_unreported_;         // tids stopped by attach, never reported
  std::set<Pid> killed_;                     // exits of these are not reported
  std::map<Tid, StopEvent> stopped_threads_; // non-stop: last stop of each stopped thread
  std::deque<std::string> console_queue_;
  // A refused hardware request's reason reaches gdb's console once (handlers_state.cc).
  void explain_refused_debug_register(const Error& error);
  bool told_no_debug_traps_ = false;
  std::vector<bool> program_signals_;
  std::set<Pid> created_; // started by us (killed at exit)
};

} // namespace gdbtrace
