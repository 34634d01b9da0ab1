// gdbtrace-server: a gdbserver-compatible remote stub with tracepoint collectors.
//
// One io_context runs everything: the gdb connection, target events (waitpid
// results the target posts) and kernel collectors' buffer draining.
#include <asio.hpp>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <unistd.h>

#include "common/debug_format.h"
#include "common/open_file_limit.h"
#include "common/startup_affinity.h"
#include "rsp/connection.h"
#include "rsp/transport.h"
#include "server/cli.h"
#include "server/gdb_server.h"
#include "server/tdesc.h"
#include "target/crash_cleanup.h"
#include "target/inferior_launch.h"
#include "target/native_target.h"
#include "trace/ptrace_collector.h"
#ifdef GDBTRACE_HAVE_JUMPPAD
#include "jumppad/jumppad_collector.h"
#endif
#include "trace/trace_engine.h"
#ifdef GDBTRACE_HAVE_KMOD
#include "kmod/module_collector.h"
#endif
#ifdef GDBTRACE_HAVE_BPF
#include "bpf/bpf_collector.h"
#endif

using namespace gdbtrace;

namespace {

// A no-op handler instead of SIG_IGN: ignored dispositions would be inherited
// by the inferior across exec, handlers are reset.
void ignore_signal(int) {}

void install_noop_handler(int sig) {
  struct sigaction sa {};
  sa.sa_handler = ignore_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, nullptr);
}

void add_collectors(TraceEngine& engine, NativeTarget& target, asio::io_context& io, bool debug) {
  auto skipped = [debug, &engine](const char* name, const Error& e) {
    engine.note_unavailable_collector(name, e.message);
    if (debug)
      debug_line("gdbtrace", std::string(name) + " collector unavailable: " + e.message);
  };
#ifdef GDBTRACE_HAVE_JUMPPAD
  // First: it takes only `ftrace` tracepoints, and those it can serve it serves
  // without a trap.
  if (auto c = make_jumppad_collector(target, io))
    engine.add_collector(std::move(*c));
  else
    skipped("jumppad", c.error());
#endif
#ifdef GDBTRACE_HAVE_KMOD
  if (auto c = make_module_collector(io))
    engine.add_collector(std::move(*c));
  else
    skipped("module", c.error());
#endif
#ifdef GDBTRACE_HAVE_BPF
  if (auto c = make_bpf_collector(io))
    engine.add_collector(std::move(*c));
  else
    skipped("eBPF", c.error());
#endif
  (void)io;
  (void)skipped;
  engine.add_collector(make_ptrace_collector(target));
}

// Serves connections until the server should exit (see gdbserver's main loop).
class Service {
public:
  Service(asio::io_context& io, GdbServer& server, const CliOptions& opts, rsp::StdioChannel stdio)
      : io_(io), server_(server), opts_(opts), stdio_(stdio) {
    server_.on_connection_closed = [this] { connection_closed(); };
  }

  // Binds the TCP port before any program starts, as gdbserver does, so a busy
  // port fails without creating a process.
  int prepare() {
    if (opts_.comm.kind != CommSpec::Kind::Tcp)
      return 0;
    auto listener = rsp::listen_tcp(io_, opts_.comm.host, opts_.comm.port);
    if (!listener) {
      const std::string& msg = listener.error().message;
      if (msg.find("cannot resolve name") != std::string::npos)
        std::fprintf(stderr, "%s\nExiting\n", msg.c_str());
      else
        std::fprintf(stderr, "Can't bind address: %s.\nExiting\n", msg.c_str());
      return 1;
    }
    listener_ = std::move(*listener);
    return 0;
  }

  int open() {
    switch (opts_.comm.kind) {
    case CommSpec::Kind::Tcp: {
      std::fprintf(stderr, "Listening on port %u\n", listener_->port());
      accept();
      return 0;
    }
    case CommSpec::Kind::Stdio: {
      auto t = rsp::make_stdio_transport(io_, stdio_);
      if (!t) {
        std::fprintf(stderr, "%s\nExiting\n", t.error().message.c_str());
        return 1;
      }
      install_noop_handler(SIGINT); // gdb's Ctrl-C reaches our process group too
      std::fprintf(stderr, "Remote debugging using stdio\n");
      start(std::move(*t));
      return 0;
    }
    case CommSpec::Kind::Device: {
      auto t = rsp::make_serial_transport(io_, opts_.comm.device);
      if (!t) {
        std::fprintf(stderr, "%s\nExiting\n", t.error().message.c_str());
        return 1;
      }
      std::fprintf(stderr, "Remote debugging using %s\n", opts_.comm.device.c_str());
      start(std::move(*t));
      return 0;
    }
    }
    return 1;
  }

  // SIGTERM, SIGHUP, and SIGINT when it cannot be gdb's ^C (not on stdio):
  // the orderly end, on the io_context, with the target's own detach/kill, so
  // no breakpoint (user or trace) stays behind in a tracee.
  void watch_termination_signals() {
    signals_.add(SIGTERM);
    signals_.add(SIGHUP);
    if (opts_.comm.kind != CommSpec::Kind::Stdio)
      signals_.add(SIGINT);
    signals_.async_wait([this](const asio::error_code& ec, int sig) {
      if (ec)
        return;
      std::fprintf(stderr,
                   "gdbtrace-server: %s: detaching attached processes, killing started ones\n",
                   strsignal(sig));
      terminated_by_ = sig;
      shutdown();
    });
  }

  // The signal that ended the service (0 if none): main re-raises it once
  // everything is cleaned up, so a shell or systemd sees "killed by SIGTERM".
  int terminated_by() const { return terminated_by_; }

private:
  // Keeps accepting while a gdb is connected (except with --once, where the
  // listener closes): a second gdb is told why it cannot debug instead of
  // hanging in the kernel's backlog.
  void accept() {
    listener_->async_accept(
        [this](std::error_code ec, std::unique_ptr<rsp::Transport> t, rsp::TcpListener::Peer peer) {
          if (ec) {
            if (ec != asio::error::operation_aborted) {
              std::fprintf(stderr, "accept failed: %s\n", ec.message().c_str());
              shutdown();
            }
            return;
          }
          // gdb's `disconnect` then at once `target extended-remote`: the new
          // connection can be accepted before connection_closed ran for the old
          // one, or before the old socket's end was read (gdb's
          // disconnected-tracing.exp was told "busy"). The old connection is
          // ended first; the new one is taken once connection_closed has run.
          if (serving_ && server_.connection_over()) {
            auto held = std::make_shared<std::unique_ptr<rsp::Transport>>(std::move(t));
            asio::post(io_, [this, held, peer] { take(std::move(*held), peer); });
            return;
          }
          take(std::move(t), peer);
        });
  }

  void take(std::unique_ptr<rsp::Transport> t, const rsp::TcpListener::Peer& peer) {
    if (serving_) {
      refuse(std::move(t), peer);
    } else {
      std::fprintf(stderr, "Remote debugging from host %s, port %u\n", peer.host.c_str(),
                   peer.port);
      serving_ = true;
      client_ = peer.host + ":" + std::to_string(peer.port);
      start(std::move(t));
      if (opts_.once) {
        listener_->close();
        return;
      }
    }
    accept();
  }

  // Answers the extra gdb's first packet with the reason, then hangs up (gdb
  // prints "Remote failure reply: E.gdbtrace-server is busy: ...").
  void refuse(std::unique_ptr<rsp::Transport> transport, const rsp::TcpListener::Peer& peer) {
    std::fprintf(stderr, "Refused a connection from host %s, port %u: gdb from %s is connected\n",
                 peer.host.c_str(), peer.port, client_.c_str());
    auto conn = std::make_shared<rsp::Connection>(std::move(transport), GdbServer::kPacketSize);
    std::weak_ptr<rsp::Connection> weak = conn;
    std::string reply = "E.gdbtrace-server is busy: it serves one gdb at a time, and gdb from " +
                        client_ + " is connected";
    refused_.insert(conn);
    conn->start({[weak, reply](std::string_view) {
                   if (auto c = weak.lock()) {
                     c->send_packet(reply);
                     c->close();
                   }
                 },
                 [] {},
                 [this, weak] {
                   // Not from inside the connection's own call: drop it afterwards.
                   asio::post(io_, [this, weak] {
                     if (auto c = weak.lock())
                       refused_.erase(c);
                   });
                 }});
  }

  void start(std::unique_ptr<rsp::Transport> transport) {
    auto conn = std::make_shared<rsp::Connection>(std::move(transport), GdbServer::kPacketSize);
    server_.attach_connection(conn);
  }

  void connection_closed() {
    serving_ = false;
    bool reopen = listener_ && !server_.exit_requested() && !opts_.once &&
                  (server_.extended() || server_.has_processes());
    if (!reopen) {
      shutdown();
      return;
    }
    std::fprintf(stderr,
                 "Remote side has terminated connection.  GDBserver will reopen the connection.\n");
    std::fprintf(stderr, "Listening on port %u\n", listener_->port());
  }

  void shutdown() {
    server_.detach_or_kill_all();
    if (listener_)
      listener_->close();
    asio::error_code ec;
    signals_.cancel(ec);
    io_.stop();
  }

  asio::io_context& io_;
  GdbServer& server_;
  const CliOptions& opts_;
  rsp::StdioChannel stdio_;
  std::unique_ptr<rsp::TcpListener> listener_;
  bool serving_ = false; // a gdb is connected
  std::string client_;   // its host:port, for the refusal message
  std::set<std::shared_ptr<rsp::Connection>> refused_;
  asio::signal_set signals_{io_};
  int terminated_by_ = 0;
};

// The server's whole life; TERMINATED_BY is set to the signal that ended it.
int serve(int argc, char** argv, int& terminated_by) {
  raise_open_file_limit();     // thousands of eBPF tracepoints hold an fd each
  remember_startup_affinity(); // programs it starts get it back (the drain may move the stub)
  auto parsed = parse_cli(std::vector<std::string>(argv + 1, argv + argc));
  if (!parsed) {
    if (!parsed.error().message.empty())
      std::fprintf(stderr, "%s\n", parsed.error().message.c_str());
    std::fputs(usage_text().c_str(), stderr);
    return 1;
  }
  const CliOptions& opts = *parsed;
  if (opts.action == CliOptions::Action::Help) {
    std::fputs(usage_text().c_str(), stdout);
    return 0;
  }
  if (opts.action == CliOptions::Action::Selftest) {
    // gdbserver's in-binary unit tests; gdbtrace's are the ctest suites (tests/unit), so answer
    // as a gdbserver built without them (gdb.server/unittest.exp then reports UNSUPPORTED).
    std::fputs("Selftests have been disabled for this build.\n", stdout);
    return 1;
  }
  if (opts.action == CliOptions::Action::Version) {
    std::fputs(version_text().c_str(), stdout);
    return 0;
  }
  if (!opts.debug_file.empty()) {
    FILE* f = std::fopen(opts.debug_file.c_str(), "ae"); // O_CLOEXEC: not the inferior's
    if (!f) {
      std::perror(opts.debug_file.c_str());
      return 1;
    }
    debug_stream() = f;
  }
  install_noop_handler(SIGPIPE); // a vanished gdb must not kill us mid-write
  crash_cleanup::install_handlers();
  rsp::StdioChannel stdio;
  if (opts.comm.kind == CommSpec::Kind::Stdio) {
    // Before any inferior exists: it must not inherit the protocol pipe as stdin/stdout.
    auto ch = rsp::take_stdio_channel();
    if (!ch) {
      std::fprintf(stderr, "%s\nExiting\n", ch.error().message.c_str());
      return 1;
    }
    stdio = *ch;
  }

  asio::io_context io;
  std::unique_ptr<NativeTarget> target = make_linux_target(io);

  ServerOptions sopts;
  sopts.multi = opts.multi;
  sopts.debug = opts.debug;
  sopts.remote_debug = opts.remote_debug;
  debug_timestamps() = opts.debug_timestamps;
  sopts.stdio_connection = opts.comm.kind == CommSpec::Kind::Stdio;
  sopts.launch.program = opts.program;
  sopts.launch.args = opts.args;
  sopts.launch.wrapper = opts.wrapper;
  sopts.launch.startup_with_shell = opts.startup_with_shell;
  sopts.launch.disable_randomization = opts.disable_randomization;

  GdbServer* server_ptr = nullptr;
  TraceEngine::Hooks hooks;
  hooks.console = [&server_ptr](const std::string& text) {
    if (server_ptr)
      server_ptr->console(text);
  };
  hooks.current_pid = [&server_ptr]() -> Pid {
    return server_ptr ? server_ptr->current_pid() : -1;
  };
  // Target-side tsave (QTSave) embeds the same description gdb reads, so a
  // fresh gdb decodes the frames' 'R' blocks with the right layout.
  hooks.target_description = [](const RegisterLayout& layout, const std::vector<bool>& present) {
    return target_xml(layout, present);
  };
  hooks.before_kernel_probe = [&server_ptr](Pid pid, uint64_t address) -> Result<void> {
    return server_ptr ? server_ptr->make_room_for_kernel_probe(pid, address) : ok();
  };
  if (opts.debug)
    hooks.debug = [](const std::string& line) { debug_line("gdbtrace", line); };
  TraceEngine engine(io, *target, hooks);
  add_collectors(engine, *target, io, opts.debug);

  GdbServer server(io, *target, &engine, sopts);
  server_ptr = &server;

  Service service(io, server, opts, stdio);
  if (int rc = service.prepare(); rc != 0)
    return rc;
  service.watch_termination_signals();

  if (opts.attach) {
    if (auto r = server.attach_initial(opts.attach_pid); !r) {
      std::fprintf(stderr, "Cannot attach to process %d: %s\nExiting\n", opts.attach_pid,
                   r.error().message.c_str());
      return 1;
    }
  } else if (!opts.program.empty()) {
    if (auto r = server.start_program(); !r) {
      std::fprintf(stderr, "%s\nExiting\n", r.error().message.c_str());
      return 1;
    }
  }

  if (int rc = service.open(); rc != 0) {
    server.detach_or_kill_all();
    return rc;
  }
  io.run();
  server_ptr = nullptr;
  terminated_by = service.terminated_by();
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  int terminated_by = 0;
  int rc = serve(argc, argv, terminated_by);
  // Every tracee is detached or killed and every kernel attachment released
  // (serve's objects are gone): end as the signal's default action would.
  if (terminated_by != 0) {
    restore_terminal_foreground(); // atexit handlers do not run then
    std::signal(terminated_by, SIG_DFL);
    std::raise(terminated_by);
  }
  return rc;
}
