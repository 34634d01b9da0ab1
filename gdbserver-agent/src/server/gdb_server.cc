#include "server/gdb_server.h"

#include <asio.hpp>
#include <cstdio>
#include <cstring>

#include "common/debug_format.h"
#include "common/hex.h"
#include "server/packet_parsers.h"
#include "server/signals.h"
#include "server/stop_reply.h"
#include "server/trace_protocol.h"
#include "trace/trace_engine.h"

namespace gdbtrace {

GdbServer::GdbServer(asio::io_context& io, NativeTarget& target, TraceEngine* engine,
                     ServerOptions options)
    : io_(io), target_(target), engine_(engine), options_(std::move(options)) {
  target_.set_event_handler([this](const StopEvent& event) { on_target_event(event); });
  target_.set_notice_handler([this](const std::string& text) {
    std::fputs(text.c_str(), stderr); // the server's log keeps it if no gdb is there to see it
    console(text);
  });
  packets_.add(rows());
  packets_.set_around([this](const PacketRow& row, const std::function<Reply()>& run) {
    return around_handler(row, run);
  });
  if (engine_) {
    trace_ = std::make_unique<TraceProtocol>(*engine_,
                                             [this](const std::string& text) { console(text); });
    packets_.add(trace_->rows());
    trace_->set_live_process([this] { return current_pid() > 0; });
  }
}

GdbServer::~GdbServer() {
  target_.set_event_handler(nullptr);
  target_.set_notice_handler(nullptr);
}

void GdbServer::debug(const std::string& text) const {
  if (options_.debug)
    debug_line("gdbtrace", text);
}

Result<Pid> GdbServer::start_program() {
  return launch(options_.launch);
}

Result<Pid> GdbServer::launch(const LaunchSpec& spec) {
  if (options_.stdio_connection)
    std::fprintf(stderr, "stdin/stdout redirected\n");
  auto pid = target_.create_inferior(spec);
  if (!pid)
    return pid;
  std::fprintf(stderr, "Process %s created; pid = %d\n", spec.program.c_str(), *pid);
  created_.insert(*pid);
  // The new process sits at its first instruction: gdb sees that as a SIGTRAP stop.
  record_initial_stop(*pid);
  return pid;
}

Result<void> GdbServer::attach_initial(Pid pid) {
  auto r = target_.attach(pid);
  if (!r)
    return r;
  std::fprintf(stderr, "Attached; pid = %d\n", pid);
  // gdbserver reports an attach as a SIGTRAP stop, "pretending it's just starting up".
  record_initial_stop(pid);
  return ok();
}

StopEvent GdbServer::record_initial_stop(Pid pid) {
  StopEvent stop;
  stop.thread = {pid, pid};
  stop.signal = SIGTRAP;
  last_stop_ = stop;
  general_thread_ = stop.thread;
  stopped_threads_[pid] = stop;
  // The other threads (of an attached process) are stopped too, with no event to
  // report. In non-stop, gdb thinks they run and stops each with vCont;t: that stop
  // is then reported at once with signal 0, as gdbserver does
  // (gdb.server/attach-flag.exp: all-stop gdb on a non-stop target).
  for (const auto& t : target_.threads())
    if (t.id.pid == pid && t.id.tid != pid)
      stopped_unreported_.insert(t.id.tid);
  return stop;
}

void GdbServer::attach_connection(std::shared_ptr<rsp::Connection> connection) {
  conn_ = std::move(connection);
  gdb_features_.clear();
  multiprocess_ = false;
  extended_ = false;
  console_open_ = false;
  cont_thread_ = {0, 0};
  pending_stops_.clear();
  if (trace_)
    trace_->reset_cursors();
  conn_->set_log(options_.remote_debug);
  conn_->start({[this](std::string_view p) { on_packet(p); }, [this] { on_interrupt(); },
                [this] { on_disconnect(); }});
}

bool GdbServer::connection_over() {
  if (!conn_)
    return true;
  if (!conn_->peer_hung_up())
    return false;
  auto conn = conn_; // close() calls on_disconnect, which lets go of conn_
  conn->close();
  return true;
}

void GdbServer::on_disconnect() {
  debug("connection closed");
  conn_.reset();
  vfile_.close_all();
  if (engine_)
    engine_->on_disconnect();
  if (non_stop_) {
    // The next gdb starts in all-stop mode.
    non_stop_ = false;
    target_.set_non_stop(false);
  }
  if (on_connection_closed)
    asio::post(io_, [this] { on_connection_closed(); });
}

void GdbServer::send(std::string_view payload) {
  if (conn_)
    conn_->send_packet(payload);
}

void GdbServer::on_packet(std::string_view packet) {
  Reply reply;
  try {
    reply = packets_.dispatch(packet);
  } catch (const std::exception& e) {
    // A handler must never take the server down; report the failure instead.
    reply = std::string("E.internal error: ") + e.what();
  }
  if (reply)
    send(*reply);
  if (exit_requested_ && conn_)
    conn_->close();
}

void GdbServer::on_interrupt() {
  if (non_stop_) {
    debug("interrupt ignored: non-stop uses vCtrlC");
    return;
  }
  // Between two stops of one gdb command (e.g. a step over a breakpoint) the
  // ^C is kept by the target for the next resume, like gdbserver's SIGINT.
  if (auto r = target_.interrupt(-1); !r)
    debug("interrupt failed: " + r.error().message);
}

static const char kInTraceFrame[] = "E.cannot modify a trace frame (tfind none first)";

// The row decides what a packet may do with inferior state: reads go to the
// live target or to the selected trace frame, chosen here once; writes are
// refused while a frame is selected. PacketTable::dispatch calls this around
// the row's handler.
GdbServer::Reply GdbServer::around_handler(const PacketRow& row,
                                           const std::function<Reply()>& run) {
  bool in_frame = engine_ && engine_->frame_selected();
  if (row.state == PacketRow::State::Writes && in_frame)
    return kInTraceFrame;
  // Only text this packet produces goes out before its reply: text queued
  // earlier keeps waiting for the next stop (as it always did), and new text
  // waits behind it rather than overtake it.
  if (row.console_before_reply && console_queue_.empty()) {
    console_open_ = true;
    Reply reply = run();
    console_open_ = false;
    return reply;
  }
  if (row.state != PacketRow::State::Reads)
    return run();

  std::optional<LiveState> live;
  std::optional<TraceFrameState> frame;
  if (in_frame) {
    state_ = &frame.emplace(*engine_);
  } else {
    ThreadId thread = general_thread();
    state_ = &live.emplace(target_, engine_, thread, thread.pid > 0 ? thread.pid : current_pid());
  }
  struct Reset {
    StateSource*& p;
    ~Reset() { p = nullptr; }
  } reset{state_};
  return run();
}

RegisterLayout GdbServer::register_layout() const {
  if (engine_ && engine_->frame_selected())
    return engine_->register_layout(); // the traced process's, which may have exited
  return target_.register_layout(current_pid());
}

Pid GdbServer::current_pid() const {
  auto procs = target_.processes();
  auto alive = [&](Pid pid) {
    return pid > 0 && std::find(procs.begin(), procs.end(), pid) != procs.end();
  };
  if (alive(general_thread_.pid))
    return general_thread_.pid;
  if (last_stop_ && alive(last_stop_->thread.pid))
    return last_stop_->thread.pid;
  return procs.empty() ? -1 : procs.front();
}

// A concrete thread for "any"/"all" ids (first thread of the process, or of
// the current process).
ThreadId GdbServer::resolve_thread(ThreadId thread) const {
  if (thread.pid > 0 && thread.tid > 0)
    return thread;
  Pid pid = thread.pid > 0 ? thread.pid : current_pid();
  for (const auto& t : target_.threads())
    if (t.id.pid == pid)
      return t.id;
  return {0, 0};
}

ThreadId GdbServer::general_thread() const {
  ThreadId t = resolve_thread(general_thread_);
  if (t.tid > 0 && !target_.thread_alive(t))
    return resolve_thread({general_thread_.pid, 0});
  return t;
}

void GdbServer::forget_process(Pid pid, const std::string& ended) {
  breakpoints_.remove_process(pid);
  std::erase_if(stopped_threads_, [pid](const auto& e) { return e.second.thread.pid == pid; });
  stopped_unreported_.clear(); // tids only; a new attach fills it again
  created_.erase(pid);
  if (engine_ && ended.empty())
    engine_->on_process_detach(pid);
  else if (engine_)
    engine_->on_process_exit(pid, ended);
}

void GdbServer::on_target_event(const StopEvent& event) {
  if (options_.debug)
    debug("target event kind " + std::to_string(static_cast<int>(event.kind)) + " thread " +
          std::to_string(event.thread.pid) + "." + std::to_string(event.thread.tid) + " signal " +
          std::to_string(event.signal) + " reason " +
          std::to_string(static_cast<int>(event.reason)));
  if (trace_ && !is_process_exit(event))
    trace_->on_process_stopped(event.thread.pid);
  if (filter_conditional_breakpoint(event))
    return;
  if (event.kind == StopKind::Execd) {
    breakpoints_.remove_process(event.thread.pid); // they went with the old image
    if (engine_)
      engine_->on_process_exec(event.thread.pid);
  }

  if (is_process_exit(event)) {
    std::string how = event.kind == StopKind::Exited
                          ? "exited with code " + std::to_string(event.exit_status)
                          : "was killed by signal " + std::to_string(event.signal) + " (SIG" +
                                host_signal_name(event.signal) + ")";
    if (trace_)
      trace_->on_process_exit(event.thread.pid, how, extended_);
    forget_process(event.thread.pid, how);
    if (killed_.erase(event.thread.pid))
      return; // gdb asked for it: nothing to report
    if (event.kind == StopKind::Exited)
      std::fprintf(stderr, "\nChild exited with status %d\n", event.exit_status);
    else
      std::fprintf(stderr, "\nChild terminated with signal = 0x%x (%s)\n",
                   gdb_signal_from_host(event.signal), host_signal_name(event.signal));
  }
  report_stop(event);
}

// A hit of a breakpoint whose condition is false (or which only runs dprintf
// commands) is not reported: print its output and let the thread go on.
bool GdbServer::filter_conditional_breakpoint(const StopEvent& event) {
  if (event.kind != StopKind::Signalled || event.signal != SIGTRAP ||
      (event.reason != StopReason::SwBreak && event.reason != StopReason::HwBreak))
    return false;
  auto regs = target_.read_registers(event.thread);
  if (!regs)
    return false;
  const GdbBreakpoint* bp = breakpoints_.find_conditional(event.thread.pid, regs->pc());
  if (!bp)
    return false;
  auto verdict = evaluate_breakpoint(*bp, target_, event.thread, *regs);
  if (!verdict.output.empty())
    console(verdict.output);
  if (verdict.stop)
    return false;
  if (event.stop_requested) {
    // gdb asked this thread to stop (non-stop vCont;t) as it hit the
    // breakpoint: resumed, it would never answer that request.
    StopEvent stopped = event;
    stopped.signal = 0;
    stopped.reason = StopReason::None;
    report_stop(stopped);
    return true;
  }

  std::vector<ResumeAction> again;
  if (non_stop_) {
    again.push_back({event.thread, ResumeKind::Continue, 0});
  } else {
    again = last_resume_;
  }
  if (auto r = target_.resume(again); !r) {
    debug("resume after false condition failed: " + r.error().message);
    return false; // report the stop rather than leave gdb waiting forever
  }
  return true;
}

std::string GdbServer::stop_reply(const StopEvent& event) {
  StopReplyOptions o;
  o.multiprocess = multiprocess_;
  o.swbreak = gdb_features_.count("swbreak") != 0;
  o.hwbreak = gdb_features_.count("hwbreak") != 0;
  std::optional<RegisterBlock> regs;
  if (event.kind != StopKind::Exited && event.kind != StopKind::Terminated &&
      event.kind != StopKind::ThreadExited && event.kind != StopKind::NoResumed) {
    auto r = target_.read_registers(event.thread);
    if (r)
      regs = *r;
    for (const auto& t : target_.threads())
      if (t.id == event.thread)
        o.core = t.core;
  }
  if (regs)
    o.regs = &*regs;
  o.layout = target_.register_layout(event.thread.pid);
  return format_stop_reply(event, o);
}

void GdbServer::report_stop(const StopEvent& event) {
  bool process_gone = is_process_exit(event);
  if (!process_gone && event.kind != StopKind::NoResumed && event.kind != StopKind::ThreadExited)
    stopped_threads_[event.thread.tid] = event;

  if (non_stop_) {
    if (!conn_)
      return;
    pending_stops_.push_back(event);
    if (pending_stops_.size() == 1) {
      std::string reply = stop_reply(event);
      conn_->send_notification("Stop:" + reply);
    }
    return;
  }

  // All-stop: only the stop that answers a resume is reported.
  if (!waiting_for_stop_) {
    if (process_gone)
      last_stop_ = event;
    debug("event while not waiting for a stop: dropped");
    return;
  }
  waiting_for_stop_ = false;
  last_stop_ = event;
  if (!process_gone && event.kind != StopKind::NoResumed)
    general_thread_ = event.thread;
  send(stop_reply(event));
}

void GdbServer::console(const std::string& text) {
  console_queue_.push_back(text);
  flush_console();
}

// gdb reads 'O' packets only while it waits for a stop reply or a qRcmd answer.
void GdbServer::flush_console() {
  if (!conn_ || !(console_open_ || (waiting_for_stop_ && !non_stop_)))
    return;
  while (!console_queue_.empty()) {
    std::string text = std::move(console_queue_.front());
    console_queue_.pop_front();
    // Keep each O packet well under PacketSize (hex doubles the size).
    for (size_t off = 0; off < text.size(); off += 4000)
      send("O" + hex::encode(std::string_view(text).substr(off, 4000)));
  }
}

void GdbServer::detach_or_kill_all() {
  for (Pid pid : target_.processes()) {
    if (target_.is_attached(pid)) {
      if (engine_) // before the detach: patched code can still be put back
        engine_->on_process_detach(pid);
      std::fprintf(stderr, "Detaching process(es): %d\n", pid);
      (void)target_.detach(pid);
    } else {
      std::fprintf(stderr, "Killing process(es): %d\n", pid);
      killed_.insert(pid);
      (void)target_.kill(pid);
    }
  }
}

} // namespace gdbtrace
