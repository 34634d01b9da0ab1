// Command line of gdbtrace-server, compatible with gdbserver's:
//   gdbtrace-server [OPTIONS] COMM PROG [ARGS...]
//   gdbtrace-server [OPTIONS] --attach COMM PID
//   gdbtrace-server [OPTIONS] --multi COMM
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"

namespace gdbtrace {

struct CommSpec {
  enum class Kind { Tcp, Stdio, Device } kind = Kind::Tcp;
  std::string host; // empty: 127.0.0.1
  uint16_t port = 0;
  std::string device;
};

struct CliOptions {
  enum class Action { Serve, Help, Version, Selftest } action = Action::Serve;
  CommSpec comm;
  bool attach = false;
  int attach_pid = 0;
  bool multi = false;
  bool once = false;
  std::vector<std::string> wrapper;
  bool debug = false;
  bool remote_debug = false;
  bool debug_timestamps = false; // --debug-format=timestamp|all
  bool startup_with_shell = true;
  bool disable_randomization = true;
  std::string debug_file; // --debug-file=FILE: debug output goes there
  std::string program;    // empty with --multi / --attach
  std::vector<std::string> args;
};

// "[HOST]:PORT", "-" / "stdio", or a tty device path.
Result<CommSpec> parse_comm(const std::string& comm);
// Parses ARGV (argv[0] excluded). Errors carry the message to print before the usage text.
Result<CliOptions> parse_cli(const std::vector<std::string>& argv);
// gdbserver's program_path: a relative PROG that exists relative to the cwd
// becomes absolute (the shell would otherwise search $PATH for it).
std::string absolute_program_path(const std::string& program);
std::string usage_text();
std::string version_text();

} // namespace gdbtrace
