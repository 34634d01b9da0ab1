// q packets: feature negotiation, thread lists, monitor commands.
#include <csignal>

#include "common/debug_format.h"
#include "common/hex.h"
#include "server/gdb_server.h"
#include "server/monitor.h"
#include "server/packet_parsers.h"
#include "server/signals.h"
#include "target/thread_db.h"
#include "trace/trace_engine.h"

namespace gdbtrace {

GdbServer::Reply GdbServer::handle_qsupported(std::string_view packet) {
  gdb_features_ = parse_qsupported(packet);
  multiprocess_ = gdb_features_.count("multiprocess") != 0;
  target_.set_fork_events(gdb_features_.count("fork-events") != 0,
                          gdb_features_.count("vfork-events") != 0,
                          gdb_features_.count("exec-events") != 0);

  // What the packet table serves, then what is not one packet's: the stop
  // reply forms we use, and the events we report when gdb said it takes them.
  std::string r = "PacketSize=" + hex::u64(kPacketSize) + ";" + packets_.features() +
                  ";multiprocess+;no-resumed+";
  for (const char* f : {"fork-events", "vfork-events", "exec-events", "swbreak", "hwbreak"})
    if (gdb_features_.count(f))
      r += std::string(";") + f + "+";
  return r;
}

GdbServer::Reply GdbServer::handle_current_thread() {
  ThreadId t = general_thread();
  if (t.tid <= 0 && last_stop_)
    t = last_stop_->thread;
  if (t.tid <= 0)
    return "E01";
  return "QC" + format_thread_id(t, multiprocess_);
}

// qGetTLSAddr:THREAD,OFFSET,LM -> the variable's address in hex (through
// libthread_db, as gdbserver does).
GdbServer::Reply GdbServer::handle_get_tls_addr(std::string_view args) {
  auto parts = split(args, ',');
  if (parts.size() != 3)
    return "E.malformed qGetTLSAddr packet";
  auto thread = parse_thread_id(parts[0], current_pid());
  auto offset = hex::parse_u64(parts[1]);
  auto lm = hex::parse_u64(parts[2]);
  if (!thread || thread->tid <= 0 || !offset || !lm)
    return "E.malformed qGetTLSAddr packet";
  if (thread->pid <= 0)
    thread->pid = current_pid();
  auto address = target_.tls_address(*thread, *offset, *lm);
  if (!address)
    return "E." + address.error().message;
  return hex::u64(*address);
}

// "qAttached" or "qAttached:PID".
GdbServer::Reply GdbServer::handle_attached(std::string_view args) {
  Pid pid = current_pid();
  if (!args.empty()) {
    auto v = args.front() == ':' ? hex::parse_u64(args.substr(1)) : std::nullopt;
    if (!v)
      return "E01";
    pid = static_cast<Pid>(*v);
  }
  auto procs = target_.processes();
  if (pid <= 0 || std::find(procs.begin(), procs.end(), pid) == procs.end())
    return "E01";
  return target_.is_attached(pid) ? "1" : "0";
}

GdbServer::Reply GdbServer::handle_thread_info(bool first) {
  if (first) {
    thread_list_.clear();
    for (const auto& t : target_.threads())
      thread_list_.push_back(format_thread_id(t.id, multiprocess_));
  }
  if (thread_list_.empty())
    return "l";
  // Page the list so a process with thousands of threads fits the packet size.
  std::string reply = "m";
  size_t n = 0;
  while (!thread_list_.empty() && n < 200) {
    if (n++)
      reply += ",";
    reply += thread_list_.front();
    thread_list_.erase(thread_list_.begin());
  }
  return reply;
}

GdbServer::Reply GdbServer::handle_rcmd(std::string_view hex_command) {
  auto command = hex::decode_string(hex_command);
  if (!command)
    return "E.malformed qRcmd packet";
  console_open_ = true;
  flush_console();
  MonitorResult result = run_monitor_command(*command, engine_);
  if (result.set_debug)
    options_.debug = *result.set_debug;
  if (result.set_remote_debug) {
    options_.remote_debug = *result.set_remote_debug;
    if (conn_)
      conn_->set_log(options_.remote_debug);
  }
  if (result.set_debug_timestamps)
    debug_timestamps() = *result.set_debug_timestamps;
  if (result.set_thread_db_search_path)
    ThreadDb::set_search_path(*result.set_thread_db_search_path);
  if (!result.output.empty())
    console(result.output);
  // As gdbserver: a failed or unknown command prints why (help text) and answers E01.
  if (!result.error.empty())
    console(result.error + "\n");
  console_open_ = false;
  if (result.exit)
    exit_requested_ = true;
  return result.error.empty() ? "OK" : "E01";
}

} // namespace gdbtrace
