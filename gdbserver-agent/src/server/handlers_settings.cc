// Q packets: settings gdb sends before or between runs (signals to pass,
// how to start the inferior, non-stop mode, events to report).
#include "common/hex.h"
#include "server/gdb_server.h"
#include "server/packet_parsers.h"
#include "server/signals.h"

namespace gdbtrace {

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

PacketHandler GdbServer::flag_setting(std::string packet, std::function<void(bool)> apply) {
  return [packet, apply](const Packet& p) -> Reply {
    auto on = parse_flag(p.args);
    if (!on)
      return "E.bad " + packet + " value";
    apply(*on);
    return "OK";
  };
}

PacketHandler GdbServer::signal_setting(std::function<void(std::vector<bool>)> apply) {
  return [apply](const Packet& p) -> Reply {
    auto signals = parse_signal_list(p.args);
    if (!signals)
      return "E.bad signal list";
    apply(std::move(*signals));
    return "OK";
  };
}

GdbServer::Reply GdbServer::handle_no_ack_mode() {
  // The OK still travels in ack mode; gdb switches after acking it.
  send("OK");
  if (conn_)
    conn_->set_no_ack(true);
  return std::nullopt;
}

GdbServer::Reply GdbServer::handle_environment_set(std::string_view hex_var) {
  LaunchSpec& spec = options_.launch;
  auto var = hex::decode_string(hex_var);
  if (!var || var->find('=') == std::string::npos)
    return "E.bad environment variable";
  std::string name = var->substr(0, var->find('='));
  std::erase(spec.env_unset, name);
  std::erase_if(spec.env_set,
                [&](const std::string& s) { return s.substr(0, s.find('=')) == name; });
  spec.env_set.push_back(*var);
  return "OK";
}

GdbServer::Reply GdbServer::handle_environment_unset(std::string_view hex_name) {
  LaunchSpec& spec = options_.launch;
  auto name = hex::decode_string(hex_name);
  if (!name)
    return "E.bad environment variable";
  std::erase_if(spec.env_set,
                [&](const std::string& s) { return s.substr(0, s.find('=')) == *name; });
  spec.env_unset.push_back(*name);
  return "OK";
}

GdbServer::Reply GdbServer::handle_environment_reset() {
  LaunchSpec& spec = options_.launch;
  spec.env_set.clear();
  spec.env_unset.clear();
  spec.env_reset = true;
  return "OK";
}

GdbServer::Reply GdbServer::handle_working_dir(std::string_view hex_dir) {
  auto dir = hex::decode_string(hex_dir);
  if (!dir)
    return "E.bad directory";
  options_.launch.cwd = *dir;
  return "OK";
}

// "QCatchSyscalls:0" or "QCatchSyscalls:1[;sysno]...".
GdbServer::Reply GdbServer::handle_catch_syscalls(std::string_view args) {
  auto parts = split(args, ';');
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

} // namespace gdbtrace
