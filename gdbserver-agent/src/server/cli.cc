#include "server/cli.h"

#include <charconv>
#include <unistd.h>

#include "gdbtrace_version.h"
#include "server/monitor.h"

namespace gdbtrace {

Result<CommSpec> parse_comm(const std::string& comm) {
  CommSpec result;
  if (comm == "-" || comm == "stdio") {
    result.kind = CommSpec::Kind::Stdio;
    return result;
  }
  // gdbserver accepts (and ignores) a protocol prefix before HOST:PORT.
  std::string spec = comm;
  for (std::string_view prefix : {"tcp:", "tcp4:", "tcp6:", "udp:", "udp4:", "udp6:"}) {
    if (spec.rfind(prefix, 0) == 0 && spec.find(':', prefix.size()) != std::string::npos) {
      spec = spec.substr(prefix.size());
      break;
    }
  }
  auto colon = spec.rfind(':');
  if (colon == std::string::npos) {
    result.kind = CommSpec::Kind::Device;
    result.device = comm;
    return result;
  }
  result.kind = CommSpec::Kind::Tcp;
  result.host = spec.substr(0, colon);
  // "[::1]:PORT" style brackets around IPv6 literals.
  if (result.host.size() >= 2 && result.host.front() == '[' && result.host.back() == ']')
    result.host = result.host.substr(1, result.host.size() - 2);
  std::string port = spec.substr(colon + 1);
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value > 65535)
    return make_error(EINVAL, "Bad port argument: " + comm);
  result.port = static_cast<uint16_t>(value);
  return result;
}

Result<CliOptions> parse_cli(const std::vector<std::string>& argv) {
  CliOptions opts;
  size_t i = 0;
  for (; i < argv.size(); i++) {
    const std::string& a = argv[i];
    if (a == "--" || !a.starts_with("--"))
      break;
    if (a == "--help") {
      opts.action = CliOptions::Action::Help;
      return opts;
    } else if (a == "--version") {
      opts.action = CliOptions::Action::Version;
      return opts;
    } else if (a == "--selftest" || a.starts_with("--selftest=")) {
      opts.action = CliOptions::Action::Selftest;
      return opts;
    } else if (a == "--attach") {
      opts.attach = true;
    } else if (a == "--multi") {
      opts.multi = true;
    } else if (a == "--once") {
      opts.once = true;
    } else if (a == "--wrapper") {
      // Everything up to the next "--" is the wrapper command.
      size_t j = i + 1;
      while (j < argv.size() && argv[j] != "--")
        opts.wrapper.push_back(argv[j++]);
      if (j == argv.size() || opts.wrapper.empty())
        return make_error(EINVAL, "Invalid --wrapper usage");
      i = j;
    } else if (a == "--debug" || a == "--debug=all" || a == "--debug=threads") {
      opts.debug = true;
    } else if (a == "--remote-debug" || a == "--debug=remote") {
      opts.remote_debug = true;
    } else if (a.starts_with("--debug-file=")) {
      opts.debug_file = a.substr(13);
    } else if (a.starts_with("--debug-format=")) {
      auto format = parse_debug_format(a.substr(15));
      if (!format)
        return format.error();
      opts.debug_timestamps = format->timestamps;
    } else if (a == "--event-loop-debug" || a.starts_with("--disable-packet=")) {
      // Accepted for compatibility; they only change gdbserver's own diagnostics.
    } else if (a == "--startup-with-shell") {
      opts.startup_with_shell = true;
    } else if (a == "--no-startup-with-shell") {
      opts.startup_with_shell = false;
    } else if (a == "--disable-randomization") {
      opts.disable_randomization = true;
    } else if (a == "--no-disable-randomization") {
      opts.disable_randomization = false;
    } else {
      return make_error(EINVAL, "Unknown argument: " + a);
    }
  }
  if (i < argv.size() && argv[i] == "--")
    i++;
  if (i >= argv.size())
    return make_error(EINVAL, "");
  auto comm = parse_comm(argv[i++]);
  if (!comm)
    return comm.error();
  opts.comm = *comm;
  // "--attach used to come after PORT, so allow it there for compatibility" (gdbserver).
  if (i < argv.size() && argv[i] == "--attach") {
    opts.attach = true;
    i++;
  }

  if (opts.attach) {
    if (i + 1 != argv.size())
      return make_error(EINVAL, "");
    const std::string& pid = argv[i];
    auto [end, ec] = std::from_chars(pid.data(), pid.data() + pid.size(), opts.attach_pid);
    if (ec != std::errc() || end != pid.data() + pid.size() || opts.attach_pid <= 0)
      return make_error(EINVAL, "Invalid process ID: " + pid);
    return opts;
  }
  if (i < argv.size()) {
    opts.program = absolute_program_path(argv[i++]);
    opts.args.assign(argv.begin() + static_cast<long>(i), argv.end());
  } else if (!opts.multi) {
    return make_error(EINVAL, "");
  }
  return opts;
}

std::string absolute_program_path(const std::string& program) {
  if (program.empty() || program[0] == '/' || ::access(program.c_str(), F_OK) != 0)
    return program;
  char cwd[4096];
  if (!::getcwd(cwd, sizeof cwd))
    return program;
  return std::string(cwd) + "/" + program;
}

std::string usage_text() {
  return R"(Usage:	gdbtrace-server [OPTIONS] COMM PROG [ARGS ...]
	gdbtrace-server [OPTIONS] --attach COMM PID
	gdbtrace-server [OPTIONS] --multi COMM

COMM may either be a tty device (for serial debugging),
HOST:PORT to listen for a TCP connection, or '-' or 'stdio' to use
stdin/stdout of gdbtrace-server.
PROG is the executable program.  ARGS are arguments passed to inferior.
PID is the process ID to attach to, when --attach is specified.

Operating modes:

  --attach              Attach to running process PID.
  --multi               Start server without a specific program, and
                        only quit when explicitly commanded.
  --once                Exit after the first connection has closed.
  --help                Print this message and then exit.
  --version             Display version information and exit.

Other options:

  --wrapper WRAPPER --  Run WRAPPER to start new programs.
  --disable-randomization
                        Run PROG with address space randomization disabled.
  --no-disable-randomization
                        Don't disable address space randomization when
                        starting PROG.
  --startup-with-shell
                        Start PROG using a shell.  I.e., execs a shell that
                        then execs PROG.  (default)
  --no-startup-with-shell
                        Exec PROG directly instead of using a shell.

Debug options:

  --debug               Enable general debugging output.
  --debug-file=FILE     Write debugging output to FILE.
  --debug-format=OPT1[,OPT2,...]
                        Accepted for gdbserver compatibility.
  --remote-debug        Enable remote protocol debugging output.

Tracepoints are collected by the gdbtrace kernel module, eBPF or ptrace
(see `monitor gdbtrace help`).
)";
}

std::string version_text() {
  return "gdbtrace-server " GDBTRACE_VERSION " (gdbserver-compatible remote stub for GDB 13)\n"
         "This gdbtrace-server was configured as \"x86_64-linux-gnu\"\n";
}

} // namespace gdbtrace
