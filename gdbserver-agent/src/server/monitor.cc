#include "server/monitor.h"

#include <charconv>
#include <vector>

#include "server/trace_report_format.h"
#include "target/thread_db.h"
#include "trace/stack_actions.h"
#include "trace/trace_engine.h"

namespace gdbtrace {

static const char kHelp[] = "The following monitor commands are supported:\n"
                            "  set debug <0|1>\n"
                            "    Enable general debugging messages\n"
                            "  set remote-debug <0|1>\n"
                            "    Enable remote protocol debugging messages\n"
                            "  set debug-format option1[,option2,...]\n"
                            "    Add additional information to debugging messages\n"
                            "    Options: all, none, timestamp\n"
                            "  set libthread-db-search-path [PATH]\n"
                            "    Where to look for libthread_db (thread-local variables)\n"
                            "  exit\n"
                            "    Quit GDBserver\n"
                            "  gdbtrace help\n"
                            "    Tracepoint collectors, status and settings of gdbtrace\n";

static std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\n");
  if (b == std::string::npos)
    return "";
  size_t e = s.find_last_not_of(" \t\n");
  return s.substr(b, e - b + 1);
}

static std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(',', start);
    out.push_back(s.substr(start, pos == std::string::npos ? std::string::npos : pos - start));
    if (pos == std::string::npos)
      return out;
    start = pos + 1;
  }
}

static std::string_view trim_spaces(std::string_view s) {
  while (!s.empty() && s.front() == ' ')
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

// `monitor gdbtrace backend [NAME|auto]`.
static std::string gdbtrace_backend(std::string_view name, TraceEngine& engine) {
  auto collectors = engine.collectors();
  if (name.empty()) {
    const std::string& preferred = engine.preferred_backend();
    std::string out =
        "backend selection: " + (preferred.empty() ? std::string("auto") : preferred) + "\n";
    if (collectors.empty())
      out += "  (no collectors available)\n";
    for (const auto& c : collectors)
      out += "  " + c.name + ": " + c.description + "\n";
    return out;
  }
  if (!engine.prefer_backend(name)) {
    std::string names;
    for (const auto& c : collectors)
      names += " " + c.name;
    return "gdbtrace: no backend '" + std::string(name) + "'; available:" + names + " auto\n";
  }
  if (name == "auto")
    return "backend selection: auto (first collector that accepts each tracepoint)\n";
  return "backend selection: " + engine.preferred_backend() +
         (engine.running() ? " (applies to tracepoints installed from now on)\n" : "\n");
}

// `monitor gdbtrace stacks [on [BYTES] | off]`: record BYTES of stack from
// $sp (and the registers) at every hit, from the next tstart on.
static std::string gdbtrace_stacks(std::string_view args, TraceEngine& engine) {
  auto describe = [&] {
    uint32_t n = engine.stack_bytes();
    return n ? "stacks: on, " + std::to_string(n) + " bytes from $sp per hit" +
                   (engine.running() ? " (from the next tstart)" : "") + "\n"
             : std::string("stacks: off\n");
  };
  if (args.empty())
    return describe();
  if (args == "off") {
    (void)engine.set_stack_bytes(0);
    return describe();
  }
  if (!args.starts_with("on") || (args.size() > 2 && args[2] != ' '))
    return "gdbtrace: use: monitor gdbtrace stacks on [BYTES] | off\n";
  std::string_view bytes = trim_spaces(args.substr(2));
  uint64_t n = kDefaultStackBytes;
  if (!bytes.empty()) {
    auto [end, ec] = std::from_chars(bytes.data(), bytes.data() + bytes.size(), n);
    if (ec != std::errc() || end != bytes.data() + bytes.size())
      return "gdbtrace: stacks: '" + std::string(bytes) + "' is not a number of bytes\n";
  }
  if (n > kMaxStackBytes) // set_stack_bytes takes 32 bits
    n = uint64_t(kMaxStackBytes) + 1;
  if (auto r = engine.set_stack_bytes(uint32_t(n)); !r)
    return "gdbtrace: stacks: " + r.error().message + "\n";
  return describe();
}

// `monitor gdbtrace help` (and a bare `monitor gdbtrace`): every subcommand,
// then which collectors this server has, so the first thing a user types
// also says which collector tracepoints will get.
static std::string gdbtrace_help(TraceEngine& engine) {
  std::string out = "gdbtrace monitor commands:\n"
                    "  gdbtrace help\n"
                    "    This list, and the collectors this server can use\n"
                    "  gdbtrace status\n"
                    "    The trace run: buffer use, and per tracepoint location its collector,\n"
                    "    hits, frames, drops and errors\n"
                    "  gdbtrace backend [module|ebpf|ptrace|auto]\n"
                    "    Show the collectors, or choose the one tracepoints installed from now on\n"
                    "    use (auto: the first that accepts each tracepoint)\n"
                    "  gdbtrace stacks [on [BYTES] | off]\n"
                    "    Also record the registers and BYTES of stack (default " +
                    std::to_string(kDefaultStackBytes) +
                    ") at every hit,\n"
                    "    for `gdbtrace stacks` and flame graphs in the gdb plugin\n"
                    "gdb settings that apply: set trace-buffer-size, set circular-trace-buffer,\n"
                    "set disconnected-tracing. Plugin commands: `help gdbtrace` in gdb.\n\n";
  return out + gdbtrace_backend("", engine);
}

// `monitor gdbtrace ...`; nullopt when COMMAND is not one (e.g. "gdbtracex").
static std::optional<std::string> gdbtrace_command(std::string_view command, TraceEngine& engine) {
  std::string_view s = trim_spaces(command);
  if (!s.starts_with("gdbtrace"))
    return std::nullopt;
  s.remove_prefix(8);
  if (!s.empty() && s.front() != ' ')
    return std::nullopt;
  s = trim_spaces(s);
  if (s.empty() || s == "help")
    return gdbtrace_help(engine);
  if (s.starts_with("backend"))
    return gdbtrace_backend(trim_spaces(s.substr(7)), engine);
  if (s == "status")
    return format_report_text(engine.report());
  if (s.starts_with("stacks") && (s.size() == 6 || s[6] == ' '))
    return gdbtrace_stacks(trim_spaces(s.substr(6)), engine);
  return "gdbtrace: unknown command '" + std::string(s) + "'\n\n" + gdbtrace_help(engine);
}

Result<DebugFormat> parse_debug_format(std::string_view options) {
  DebugFormat f;
  for (const auto& raw : split_commas(std::string(trim_spaces(options)))) {
    std::string opt = trim(raw);
    if (opt == "all") {
      f.timestamps = true;
      f.messages += "All extra debug format options enabled.\n";
    } else if (opt == "none") {
      f.timestamps = false;
      f.messages += "All extra debug format options disabled.\n";
    } else if (opt == "timestamp") {
      f.timestamps = true;
      f.messages += "Timestamps will be added to debug output.\n";
    } else if (!opt.empty()) { // an empty option ("a,,b") is ignored, as by gdbserver
      return make_error(EINVAL, "Unknown debug-format argument: \"" + opt + "\"\n");
    }
  }
  return f;
}

MonitorResult run_monitor_command(const std::string& raw, TraceEngine* engine) {
  MonitorResult r;
  std::string cmd = trim(raw);
  if (cmd == "help") {
    r.output = kHelp;
  } else if (cmd == "exit") {
    r.exit = true;
  } else if (cmd == "set debug 1" || cmd == "set debug on") {
    r.set_debug = true;
    r.output = "Debug output enabled.\n";
  } else if (cmd == "set debug 0" || cmd == "set debug off") {
    r.set_debug = false;
    r.output = "Debug output disabled.\n";
  } else if (cmd == "set remote-debug 1" || cmd == "set remote-debug on") {
    r.set_remote_debug = true;
    r.output = "Protocol debug output enabled.\n";
  } else if (cmd == "set remote-debug 0" || cmd == "set remote-debug off") {
    r.set_remote_debug = false;
    r.output = "Protocol debug output disabled.\n";
  } else if (cmd.rfind("set debug-format ", 0) == 0) {
    auto format = parse_debug_format(cmd.substr(17));
    if (!format) {
      r.error = format.error().message + kHelp;
      return r;
    }
    r.set_debug_timestamps = format->timestamps;
    r.output = format->messages;
  } else if (cmd == "set libthread-db-search-path" ||
             cmd.rfind("set libthread-db-search-path ", 0) == 0) {
    std::string path = trim(cmd.substr(28));
    r.set_thread_db_search_path = path;
    r.output = "libthread-db-search-path set to `" +
               (path.empty() ? std::string(ThreadDb::kDefaultSearchPath) : path) + "'\n";
  } else if (cmd.rfind("gdbtrace", 0) == 0 && engine) {
    auto out = gdbtrace_command(cmd, *engine);
    if (out)
      r.output = *out;
    else
      r.error = "Unknown gdbtrace command: " + cmd + " (try `monitor gdbtrace help`)";
  } else {
    r.error = std::string("Unknown monitor command.\n\n") + kHelp;
  }
  return r;
}

} // namespace gdbtrace
