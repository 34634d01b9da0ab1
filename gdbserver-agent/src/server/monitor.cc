#include "server/monitor.h"

#include <charconv>
#include <functional>
#include <vector>

#include "server/trace_report_format.h"
#include "target/thread_db.h"
#include "trace/stack_actions.h"
#include "trace/trace_engine.h"

namespace gdbtrace {

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

// `monitor gdbtrace stream [FILE | off]`.
static std::string gdbtrace_stream(std::string_view args, TraceEngine& engine) {
  if (!args.empty()) {
    std::string path(args == "off" ? std::string_view() : args);
    if (auto r = engine.set_stream(path); !r)
      return "gdbtrace: stream: " + r.error().message + "\n";
  }
  engine.stream_settle(); // as `gdbtrace status`: the frames drained so far are counted
  return format_stream_line(engine.stream_report(), engine.running());
}

// A monitor command: how its name is matched against what the user typed,
// the usage and help lines `monitor help` lists (a command with no usage is
// not listed), and its handler. A handler returns false when ARGS are not a
// form it takes: the user then gets the unknown-command help.
template <typename Handler> struct MonitorCommand {
  enum class Match {
    Exact,  // the whole command: "exit"
    Word,   // the name alone or followed by ' ' and arguments: "set debug on"
    Prefix, // anything that starts with the name: "backendx" is backend "x"
  };
  std::string_view name;
  Match match;
  std::string usage;             // e.g. "set debug <0|1>"
  std::vector<std::string> help; // lines, each printed indented under the usage
  Handler run;
};

// The command of TABLE that COMMAND names (the longest name winning) and what
// follows its name; nullptr when none does.
template <typename Handler>
static const MonitorCommand<Handler>*
find_command(const std::vector<MonitorCommand<Handler>>& table, std::string_view command,
             std::string_view& args) {
  using Match = typename MonitorCommand<Handler>::Match;
  const MonitorCommand<Handler>* best = nullptr;
  for (const auto& c : table) {
    if (!command.starts_with(c.name))
      continue;
    std::string_view rest = command.substr(c.name.size());
    bool match =
        c.match == Match::Prefix || rest.empty() || (c.match == Match::Word && rest.front() == ' ');
    if (match && (!best || c.name.size() > best->name.size())) {
      best = &c;
      args = rest;
    }
  }
  return best;
}

// "  USAGE\n    HELP LINE\n..." for every listed command of TABLE.
template <typename Handler>
static std::string list_commands(const std::vector<MonitorCommand<Handler>>& table) {
  std::string out;
  for (const auto& c : table) {
    if (c.usage.empty())
      continue;
    out += "  " + c.usage + "\n";
    for (const auto& line : c.help)
      out += "    " + line + "\n";
  }
  return out;
}

// `monitor gdbtrace SUBCOMMAND`: ARGS is what follows the subcommand's name.
using GdbtraceHandler = std::string (*)(std::string_view args, TraceEngine& engine);
static const std::vector<MonitorCommand<GdbtraceHandler>>& gdbtrace_commands();

// `monitor gdbtrace help` (and a bare `monitor gdbtrace`): every subcommand,
// then which collectors this server has, so the first thing a user types
// also says which collector tracepoints will get.
static std::string gdbtrace_help(TraceEngine& engine) {
  return "gdbtrace monitor commands:\n" + list_commands(gdbtrace_commands()) +
         "gdb settings that apply: set trace-buffer-size, set circular-trace-buffer,\n"
         "set disconnected-tracing. Plugin commands: `help gdbtrace` in gdb.\n\n" +
         gdbtrace_backend("", engine);
}

static const std::vector<MonitorCommand<GdbtraceHandler>>& gdbtrace_commands() {
  using Match = MonitorCommand<GdbtraceHandler>::Match;
  static const std::vector<MonitorCommand<GdbtraceHandler>> commands = {
      {"help",
       Match::Exact,
       "gdbtrace help",
       {"This list, and the collectors this server can use"},
       [](std::string_view, TraceEngine& engine) { return gdbtrace_help(engine); }},
      {"status",
       Match::Exact,
       "gdbtrace status",
       {"The trace run: buffer use, the stream, and per tracepoint location its",
        "collector, hits, frames, drops and errors"},
       [](std::string_view, TraceEngine& engine) {
         TraceReport r = engine.report();
         // A person's one look: the stream line counts what the drain just
         // handed to the writer (a wait for the disk; the JSON status does not).
         engine.stream_settle();
         r.stream = engine.stream_report();
         return format_report_text(r);
       }},
      {"stream",
       Match::Word,
       "gdbtrace stream [FILE | off]",
       {"Also write every frame to FILE, a tfile (`target tfile FILE`), as it is",
        "collected: from now on during a run, else from the next tstart (each",
        "tstart rewrites FILE). The trace buffer then keeps the newest frames",
        "for tfind instead of stopping the run when full. off: stop writing"},
       [](std::string_view args, TraceEngine& engine) {
         return gdbtrace_stream(trim_spaces(args), engine);
       }},
      {"backend",
       Match::Prefix,
       "gdbtrace backend [module|ebpf|ptrace|auto]",
       {"Show the collectors, or choose the one tracepoints installed from now on",
        "use (auto: the first that accepts each tracepoint)"},
       [](std::string_view args, TraceEngine& engine) {
         return gdbtrace_backend(trim_spaces(args), engine);
       }},
      {"stacks",
       Match::Word,
       "gdbtrace stacks [on [BYTES] | off]",
       {"Also record the registers and BYTES of stack (default " +
            std::to_string(kDefaultStackBytes) + ") at every hit,",
        "for `gdbtrace stacks` and flame graphs in the gdb plugin"},
       [](std::string_view args, TraceEngine& engine) {
         return gdbtrace_stacks(trim_spaces(args), engine);
       }},
  };
  return commands;
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
  if (s.empty())
    return gdbtrace_help(engine);
  std::string_view args;
  if (const auto* c = find_command(gdbtrace_commands(), s, args))
    return c->run(args, engine);
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

// A top-level monitor command's handler: ARGS is what follows its name.
using MonitorHandler =
    std::function<bool(std::string_view args, TraceEngine* engine, MonitorResult& r)>;
static const std::vector<MonitorCommand<MonitorHandler>>& monitor_commands();

// `monitor help`, gdbserver's wording, from the registry.
static std::string monitor_help() {
  return "The following monitor commands are supported:\n" + list_commands(monitor_commands());
}

// "1"/"on" or "0"/"off", gdbserver's spellings of a `set` flag.
static std::optional<bool> parse_on_off(std::string_view args) {
  if (args == " 1" || args == " on")
    return true;
  if (args == " 0" || args == " off")
    return false;
  return std::nullopt;
}

// `set NAME <0|1>`: sets FIELD of the result and prints gdbserver's line for
// the value.
static MonitorCommand<MonitorHandler> flag_command(std::string_view name, std::string help,
                                                   std::optional<bool> MonitorResult::*field,
                                                   const char* on_text, const char* off_text) {
  return {name,
          MonitorCommand<MonitorHandler>::Match::Word,
          std::string(name) + " <0|1>",
          {std::move(help)},
          [=](std::string_view args, TraceEngine*, MonitorResult& r) {
            auto on = parse_on_off(args);
            if (!on)
              return false;
            r.*field = *on;
            r.output = *on ? on_text : off_text;
            return true;
          }};
}

static const std::vector<MonitorCommand<MonitorHandler>>& monitor_commands() {
  using Match = MonitorCommand<MonitorHandler>::Match;
  static const std::vector<MonitorCommand<MonitorHandler>> commands = {
      {"help",
       Match::Exact,
       "",
       {},
       [](std::string_view, TraceEngine*, MonitorResult& r) {
         r.output = monitor_help();
         return true;
       }},
      flag_command("set debug", "Enable general debugging messages", &MonitorResult::set_debug,
                   "Debug output enabled.\n", "Debug output disabled.\n"),
      flag_command("set remote-debug", "Enable remote protocol debugging messages",
                   &MonitorResult::set_remote_debug, "Protocol debug output enabled.\n",
                   "Protocol debug output disabled.\n"),
      {"set debug-format",
       Match::Word,
       "set debug-format option1[,option2,...]",
       {"Add additional information to debugging messages", "Options: all, none, timestamp"},
       [](std::string_view args, TraceEngine*, MonitorResult& r) {
         if (args.empty())
           return false;
         auto format = parse_debug_format(args.substr(1));
         if (!format) {
           r.error = format.error().message + monitor_help();
           return true;
         }
         r.set_debug_timestamps = format->timestamps;
         r.output = format->messages;
         return true;
       }},
      {"set libthread-db-search-path",
       Match::Word,
       "set libthread-db-search-path [PATH]",
       {"Where to look for libthread_db (thread-local variables)"},
       [](std::string_view args, TraceEngine*, MonitorResult& r) {
         std::string path = trim(std::string(args));
         r.set_thread_db_search_path = path;
         r.output = "libthread-db-search-path set to `" +
                    (path.empty() ? std::string(ThreadDb::kDefaultSearchPath) : path) + "'\n";
         return true;
       }},
      {"exit",
       Match::Exact,
       "exit",
       {"Quit GDBserver"},
       [](std::string_view, TraceEngine*, MonitorResult& r) {
         r.exit = true;
         return true;
       }},
      // Served only with a trace engine; without one it is an unknown command.
      {"gdbtrace",
       Match::Prefix,
       "gdbtrace help",
       {"Tracepoint collectors, status and settings of gdbtrace"},
       [](std::string_view, TraceEngine* engine, MonitorResult& r) {
         if (!engine)
           return false;
         auto out = gdbtrace_command(r.command, *engine);
         if (out)
           r.output = *out;
         else
           r.error = "Unknown gdbtrace command: " + r.command + " (try `monitor gdbtrace help`)";
         return true;
       }},
  };
  return commands;
}

MonitorResult run_monitor_command(const std::string& raw, TraceEngine* engine) {
  MonitorResult r;
  r.command = trim(raw);
  std::string_view args;
  const auto* c = find_command(monitor_commands(), r.command, args);
  if (!c || !c->run(args, engine, r)) {
    MonitorResult unknown;
    unknown.command = r.command;
    unknown.error = "Unknown monitor command.\n\n" + monitor_help();
    return unknown;
  }
  return r;
}

} // namespace gdbtrace
