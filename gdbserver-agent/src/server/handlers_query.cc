// q/Q packets: feature negotiation, settings, thread lists, qXfer objects,
// monitor commands.
#include <csignal>

#include "common/hex.h"
#include "rsp/packet_codec.h"
#include "server/gdb_server.h"
#include "server/monitor.h"
#include "server/packet_parsers.h"
#include "server/signals.h"
#include "server/tdesc.h"
#include "server/xml_documents.h"
#include "trace/trace_engine.h"

namespace gdbtrace {

static bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

GdbServer::Reply GdbServer::handle_qsupported(std::string_view packet) {
  gdb_features_ = parse_qsupported(packet);
  multiprocess_ = gdb_features_.count("multiprocess") != 0;
  target_.set_fork_events(gdb_features_.count("fork-events") != 0,
                          gdb_features_.count("vfork-events") != 0,
                          gdb_features_.count("exec-events") != 0);

  std::string r = "PacketSize=" + hex::u64(kPacketSize);
  r += ";QPassSignals+;QProgramSignals+;QStartupWithShell+;QEnvironmentHexEncoded+"
       ";QEnvironmentReset+;QEnvironmentUnset+;QSetWorkingDir+;QCatchSyscalls+"
       ";qXfer:libraries-svr4:read+;qXfer:auxv:read+;qXfer:siginfo:read+"
       ";qXfer:siginfo:write+;qXfer:features:read+"
       ";QStartNoAckMode+;multiprocess+";
  for (const char* f : {"fork-events", "vfork-events", "exec-events"})
    if (gdb_features_.count(f))
      r += std::string(";") + f + "+";
  r += ";QNonStop+;QDisableRandomization+;qXfer:threads:read+";
  if (engine_)
    r += engine_->supported_features();
  r += ";ConditionalBreakpoints+;BreakpointCommands+";
  for (const char* f : {"swbreak", "hwbreak"})
    if (gdb_features_.count(f))
      r += std::string(";") + f + "+";
  r += ";qXfer:exec-file:read+;vContSupported+;QThreadEvents+;no-resumed+";
  return r;
}

GdbServer::Reply GdbServer::handle_general_query(std::string_view packet) {
  if (packet == "qC") {
    ThreadId t = general_thread();
    if (t.tid <= 0 && last_stop_)
      t = last_stop_->thread;
    if (t.tid <= 0)
      return "E01";
    return "QC" + format_thread_id(t, multiprocess_);
  }
  if (packet == "qfThreadInfo")
    return handle_thread_info(true);
  if (packet == "qsThreadInfo")
    return handle_thread_info(false);
  if (starts_with(packet, "qAttached")) {
    Pid pid = current_pid();
    if (starts_with(packet, "qAttached:")) {
      auto v = hex::parse_u64(packet.substr(10));
      if (!v)
        return "E01";
      pid = static_cast<Pid>(*v);
    }
    auto procs = target_.processes();
    if (pid <= 0 || std::find(procs.begin(), procs.end(), pid) == procs.end())
      return "E01";
    return target_.is_attached(pid) ? "1" : "0";
  }
  if (starts_with(packet, "qSymbol:"))
    return "OK"; // we look up no symbols
  return "";
}

static std::optional<bool> parse_flag(std::string_view value) {
  if (value == "0")
    return false;
  if (value == "1")
    return true;
  return std::nullopt;
}

// A list of gdb signal numbers "a;b;c" -> host-indexed booleans.
static std::optional<std::vector<bool>> parse_signal_list(std::string_view list) {
  std::vector<bool> host(65, false);
  if (list.empty())
    return host;
  for (auto item : split(list, ';')) {
    if (item.empty())
      continue;
    auto v = hex::parse_u64(item);
    if (!v || *v >= static_cast<uint64_t>(kGdbSignalLast))
      return std::nullopt;
    int h = host_signal_from_gdb(static_cast<int>(*v));
    if (h > 0 && h < 65)
      host[static_cast<size_t>(h)] = true;
  }
  return host;
}

GdbServer::Reply GdbServer::handle_general_set(std::string_view packet) {
  auto value_of = [&](std::string_view name) { return packet.substr(name.size()); };
  LaunchSpec& spec = options_.launch;
  if (packet == "QStartNoAckMode") {
    // The OK still travels in ack mode; gdb switches after acking it.
    send("OK");
    if (conn_)
      conn_->set_no_ack(true);
    return std::nullopt;
  }
  if (starts_with(packet, "QNonStop:")) {
    auto on = parse_flag(value_of("QNonStop:"));
    if (!on)
      return "E.bad QNonStop value";
    non_stop_ = *on;
    target_.set_non_stop(*on);
    pending_stops_.clear();
    return "OK";
  }
  if (starts_with(packet, "QPassSignals:")) {
    auto list = parse_signal_list(value_of("QPassSignals:"));
    if (!list)
      return "E.bad signal list";
    target_.set_pass_signals(*list);
    return "OK";
  }
  if (starts_with(packet, "QProgramSignals:")) {
    auto list = parse_signal_list(value_of("QProgramSignals:"));
    if (!list)
      return "E.bad signal list";
    program_signals_ = *list;
    return "OK";
  }
  if (starts_with(packet, "QStartupWithShell:")) {
    auto on = parse_flag(value_of("QStartupWithShell:"));
    if (!on)
      return "E.bad QStartupWithShell value";
    spec.startup_with_shell = *on;
    return "OK";
  }
  if (starts_with(packet, "QDisableRandomization:")) {
    auto on = parse_flag(value_of("QDisableRandomization:"));
    if (!on)
      return "E.bad QDisableRandomization value";
    spec.disable_randomization = *on;
    return "OK";
  }
  if (starts_with(packet, "QEnvironmentHexEncoded:")) {
    auto var = hex::decode_string(value_of("QEnvironmentHexEncoded:"));
    if (!var || var->find('=') == std::string::npos)
      return "E.bad environment variable";
    std::string name = var->substr(0, var->find('='));
    std::erase(spec.env_unset, name);
    std::erase_if(spec.env_set,
                  [&](const std::string& s) { return s.substr(0, s.find('=')) == name; });
    spec.env_set.push_back(*var);
    return "OK";
  }
  if (starts_with(packet, "QEnvironmentUnset:")) {
    auto name = hex::decode_string(value_of("QEnvironmentUnset:"));
    if (!name)
      return "E.bad environment variable";
    std::erase_if(spec.env_set,
                  [&](const std::string& s) { return s.substr(0, s.find('=')) == *name; });
    spec.env_unset.push_back(*name);
    return "OK";
  }
  if (packet == "QEnvironmentReset") {
    spec.env_set.clear();
    spec.env_unset.clear();
    spec.env_reset = true;
    return "OK";
  }
  if (starts_with(packet, "QSetWorkingDir:")) {
    auto dir = hex::decode_string(value_of("QSetWorkingDir:"));
    if (!dir)
      return "E.bad directory";
    spec.cwd = *dir;
    return "OK";
  }
  if (starts_with(packet, "QThreadEvents:")) {
    auto on = parse_flag(value_of("QThreadEvents:"));
    if (!on)
      return "E.bad QThreadEvents value";
    target_.set_report_thread_events(*on);
    return "OK";
  }
  if (starts_with(packet, "QCatchSyscalls:")) {
    // "QCatchSyscalls:0" or "QCatchSyscalls:1[;sysno]..."
    auto parts = split(value_of("QCatchSyscalls:"), ';');
    auto on = parse_flag(parts[0]);
    if (!on)
      return "E.bad QCatchSyscalls value";
    std::vector<int> syscalls;
    for (size_t i = 1; i < parts.size(); i++) {
      auto v = hex::parse_u64(parts[i]);
      if (!v || *v > 100000)
        return "E.bad syscall number";
      syscalls.push_back(static_cast<int>(*v));
    }
    Pid pid = current_pid();
    if (pid <= 0)
      return "E.no process";
    target_.set_catch_syscalls(pid, *on, syscalls);
    return "OK";
  }
  return "";
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

Result<std::string> GdbServer::xfer_document(const std::string& object, const std::string& annex) {
  if (object == "features") {
    if (annex != "target.xml")
      return make_error(ENOENT, "unknown annex " + annex);
    return target_xml(target_.has_avx());
  }
  if (object == "threads")
    return threads_xml(target_.threads(), multiprocess_);
  if (object == "traceframe-info") {
    if (!engine_ || !engine_->frame_selected())
      return make_error(EINVAL, "no trace frame selected");
    return engine_->traceframe_info_xml();
  }
  Pid pid = current_pid();
  if (object == "exec-file") {
    if (!annex.empty()) {
      auto v = hex::parse_u64(annex);
      if (!v || *v > 0x7fffffff)
        return make_error(EINVAL, "bad pid");
      pid = static_cast<Pid>(*v);
    }
    if (pid <= 0)
      return make_error(ESRCH, "no process");
    return target_.exec_file(pid);
  }
  if (pid <= 0)
    return make_error(ESRCH, "no process");
  if (object == "auxv")
    return target_.auxv(pid);
  if (object == "siginfo")
    return target_.read_siginfo(general_thread());
  if (object == "libraries-svr4") {
    uint64_t main_lm = 0;
    auto libs = target_.libraries(pid, main_lm);
    if (!libs)
      return libs.error();
    return libraries_svr4_xml(*libs, main_lm);
  }
  return make_error(ENOTSUP, "unsupported object");
}

GdbServer::Reply GdbServer::handle_qxfer(std::string_view packet) {
  auto req = parse_qxfer_read(packet);
  if (!req) {
    if (starts_with(packet, "qXfer:siginfo:write:"))
      return handle_siginfo_write(packet);
    auto parts = split(packet, ':');
    if (parts.size() >= 3 && parts[2] != "read")
      return ""; // other writes are not supported
    return "E.malformed qXfer packet";
  }
  static const std::set<std::string> kObjects = {
      "features", "threads", "traceframe-info", "exec-file", "auxv", "libraries-svr4", "siginfo"};
  if (!kObjects.count(req->object))
    return "";
  auto doc = xfer_document(req->object, req->annex);
  if (!doc)
    return "E." + doc.error().message;
  if (req->offset >= doc->size())
    return "l";
  // Escaping may double the data; keep the reply within PacketSize.
  uint64_t len = std::min<uint64_t>(req->length, kPacketSize / 2 - 16);
  std::string_view chunk = std::string_view(*doc).substr(req->offset, len);
  bool last = req->offset + chunk.size() >= doc->size();
  return std::string(last ? "l" : "m") + rsp::escape_binary(chunk);
}

// qXfer:siginfo:write::OFFSET:DATA — patches the stopped thread's siginfo.
GdbServer::Reply GdbServer::handle_siginfo_write(std::string_view packet) {
  std::string_view rest = packet.substr(std::string_view("qXfer:siginfo:write:").size());
  auto parts = split(rest, ':');
  if (parts.size() < 3 || !parts[0].empty())
    return "E.malformed qXfer write";
  auto offset = hex::parse_u64(parts[1]);
  size_t data_pos = rest.find(':', parts[0].size() + 1 + parts[1].size()) + 1;
  auto data = rsp::unescape_binary(rest.substr(data_pos));
  if (!offset || !data)
    return "E.malformed qXfer write";
  ThreadId t = general_thread();
  auto current = target_.read_siginfo(t);
  if (!current)
    return "E." + current.error().message;
  if (*offset + data->size() > current->size())
    return "E.write beyond siginfo";
  current->replace(*offset, data->size(), *data);
  auto w = target_.write_siginfo(t, *current);
  if (!w)
    return "E." + w.error().message;
  return hex::u64(data->size());
}

GdbServer::Reply GdbServer::handle_rcmd(std::string_view packet) {
  auto command = hex::decode_string(packet.substr(6));
  if (!command)
    return "E.malformed qRcmd packet";
  in_rcmd_ = true;
  flush_console();
  MonitorResult result = run_monitor_command(*command, engine_);
  if (result.set_debug)
    options_.debug = *result.set_debug;
  if (result.set_remote_debug) {
    options_.remote_debug = *result.set_remote_debug;
    if (conn_)
      conn_->set_log(options_.remote_debug);
  }
  if (!result.output.empty())
    console(result.output);
  // As gdbserver: a failed or unknown command prints why (help text) and answers E01.
  if (!result.error.empty())
    console(result.error + "\n");
  in_rcmd_ = false;
  if (result.exit)
    exit_requested_ = true;
  return result.error.empty() ? "OK" : "E01";
}

} // namespace gdbtrace
