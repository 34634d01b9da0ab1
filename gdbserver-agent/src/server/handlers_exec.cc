// Execution control: '?', vCont and legacy c/s, non-stop notifications,
// vRun/vAttach/vKill/k/D, thread selection.
#include <algorithm>
#include <asio.hpp>
#include <csignal>
#include <cstdio>

#include "common/hex.h"
#include "server/cli.h"
#include "server/gdb_server.h"
#include "server/packet_parsers.h"
#include "server/signals.h"
#include "server/stop_reply.h"
#include "trace/trace_engine.h"

namespace gdbtrace {

GdbServer::Reply GdbServer::handle_status() {
  if (non_stop_) {
    // Every stopped thread's last stop: the first now, the rest via vStopped.
    pending_stops_.clear();
    for (const auto& t : target_.threads()) {
      auto it = stopped_threads_.find(t.id.tid);
      if (it != stopped_threads_.end())
        pending_stops_.push_back(it->second);
    }
    if (pending_stops_.empty())
      return "OK";
    return stop_reply(pending_stops_.front());
  }
  if (target_.processes().empty()) {
    if (last_stop_ && is_process_exit(*last_stop_))
      return stop_reply(*last_stop_);
    return "W00";
  }
  target_.pause_all(); // a previous gdb may have left it running
  StopEvent stop;
  if (last_stop_ && !is_process_exit(*last_stop_) && target_.thread_alive(last_stop_->thread)) {
    stop = *last_stop_;
  } else {
    stop.thread = general_thread();
    stop.signal = 0;
  }
  general_thread_ = stop.thread;
  return stop_reply(stop);
}

// Normalises a protocol thread id for the target: "any" becomes the current process.
static ThreadId for_target(ThreadId id, Pid current) {
  if (id.pid == 0)
    id.pid = current;
  if (id.tid == 0)
    id.tid = -1;
  return id;
}

GdbServer::Reply GdbServer::handle_vcont(std::string_view packet) {
  Pid current = current_pid();
  auto parsed = parse_vcont(packet.substr(5), current);
  if (!parsed)
    return "E.malformed vCont packet";
  // No process left is no error (gdbserver's vCont never checks): with several inferiors ending
  // at once, gdb's stop request for one whose exit it has not pulled yet finds nothing to stop
  // (non-stop: OK; the exit notification answers it); an all-stop resume finds no resumed
  // thread ('N'), after any exit still to report.
  std::vector<ResumeAction> actions;
  for (const auto& a : *parsed) {
    ResumeAction r;
    r.thread = for_target(a.thread, current);
    r.kind = a.kind;
    r.signal = host_signal_from_gdb(a.gdb_signal);
    r.range_start = a.range_start;
    r.range_end = a.range_end;
    actions.push_back(r);
  }
  return resume(std::move(actions));
}

GdbServer::Reply GdbServer::handle_legacy_resume(std::string_view packet) {
  Pid current = current_pid();
  if (current <= 0)
    return "E.no process";
  bool step = packet[0] == 's' || packet[0] == 'S';
  int gdb_sig = 0;
  if (packet[0] == 'C' || packet[0] == 'S') {
    auto sig = hex::parse_u64(packet.substr(1, packet.find(';') - 1));
    if (!sig || *sig > 255)
      return "E.malformed resume packet";
    gdb_sig = static_cast<int>(*sig);
  } else if (packet.size() > 1) {
    return "E.resuming at an address is not supported";
  }
  // As gdbserver: the Hc thread (or the current one) gets the step/signal,
  // every other thread continues.
  bool valid_cont = cont_thread_.tid > 0;
  ThreadId thread = valid_cont ? cont_thread_ : general_thread();
  std::vector<ResumeAction> actions;
  if (step || gdb_sig || valid_cont)
    actions.push_back(
        {thread, step ? ResumeKind::Step : ResumeKind::Continue, host_signal_from_gdb(gdb_sig)});
  if (!valid_cont)
    actions.push_back({{-1, -1}, ResumeKind::Continue, 0});
  return resume(std::move(actions));
}

static bool action_covers(const ResumeAction& a, ThreadId t) {
  return (a.thread.pid == -1 || a.thread.pid == t.pid) &&
         (a.thread.tid == -1 || a.thread.tid == t.tid);
}

// Non-stop: a thread whose stop is still in the notification queue, and the
// child of a queued fork event (gdb does not know that process yet), are not
// resumed by a wildcard action (as gdbserver's in_queued_stop_replies): gdb
// decides about them once it has pulled the stop. Explicit actions, leftmost
// in the packet, still apply.
void GdbServer::leave_queued_stops(std::vector<ResumeAction>& actions) const {
  auto wildcard = std::find_if(actions.begin(), actions.end(),
                               [](const ResumeAction& a) { return a.thread.tid == -1; });
  if (!non_stop_ || pending_stops_.empty() || wildcard == actions.end())
    return;
  std::vector<ResumeAction> leave;
  for (const auto& ev : pending_stops_) {
    if (ev.kind == StopKind::Forked || ev.kind == StopKind::VForked)
      leave.push_back({{ev.child.pid, -1}, ResumeKind::Leave, 0});
    if (ev.thread.tid > 0)
      leave.push_back({ev.thread, ResumeKind::Leave, 0});
  }
  actions.insert(wildcard, leave.begin(), leave.end());
}

GdbServer::Reply GdbServer::resume(std::vector<ResumeAction> actions) {
  leave_queued_stops(actions);
  if (auto r = target_.resume(actions); !r)
    return "E." + r.error().message;
  if (non_stop_) {
    for (const auto& t : target_.threads()) {
      for (const auto& a : actions) {
        if (!action_covers(a, t.id))
          continue;
        if (a.kind == ResumeKind::Leave)
          break;
        if (a.kind != ResumeKind::Stop) {
          stopped_threads_.erase(t.id.tid);
        } else if (stopped_unreported_.count(t.id.tid)) {
          // Already stopped (by attach): no event will come, so report it now.
          StopEvent s;
          s.thread = t.id;
          asio::post(io_, [this, s] { report_stop(s); });
        }
        stopped_unreported_.erase(t.id.tid);
        break; // the leftmost matching action applies
      }
    }
    return "OK";
  }
  stopped_unreported_.clear();
  waiting_for_stop_ = true;
  last_resume_ = std::move(actions);
  stopped_threads_.clear();
  flush_console();
  return std::nullopt; // the stop reply answers this packet
}

GdbServer::Reply GdbServer::handle_vstopped() {
  if (!pending_stops_.empty())
    pending_stops_.pop_front();
  if (pending_stops_.empty())
    return "OK";
  return stop_reply(pending_stops_.front());
}

GdbServer::Reply GdbServer::handle_vrun(std::string_view packet) {
  auto args = parse_vrun(packet);
  if (!args || args->empty())
    return "E.malformed vRun packet";
  LaunchSpec spec = options_.launch;
  if (!(*args)[0].empty())
    spec.program = absolute_program_path((*args)[0]);
  if (spec.program.empty())
    return "E.no program to run";
  spec.args.assign(args->begin() + 1, args->end());
  auto pid = launch(spec);
  if (!pid)
    return "E." + pid.error().message;
  options_.launch.program = spec.program;
  options_.launch.args = spec.args;
  return stop_reply(*last_stop_);
}

GdbServer::Reply GdbServer::handle_vattach(std::string_view packet) {
  auto v = hex::parse_u64(packet.substr(8));
  if (!v || *v == 0 || *v > 0x7fffffff)
    return "E.malformed vAttach packet";
  Pid pid = static_cast<Pid>(*v);
  if (auto r = target_.attach(pid); !r) {
    // gdb 13 prints only "Attaching to process N failed" for any error reply: the reason goes
    // to our stderr too, where gdbserver prints its own.
    std::fprintf(stderr, "gdbtrace-server: %s\n", r.error().message.c_str());
    return "E." + r.error().message;
  }
  std::fprintf(stderr, "Attached; pid = %d\n", pid);
  StopEvent stop;
  stop.thread = {pid, pid};
  stop.signal = SIGTRAP;
  general_thread_ = stop.thread;
  if (!non_stop_) {
    if (auto sig = target_.take_attach_signal(pid))
      stop.signal = *sig;
    last_stop_ = stop;
    stopped_threads_[pid] = stop;
    return stop_reply(stop);
  }
  // Non-stop, as gdbserver: OK, and no stop notification until gdb asks the
  // threads to stop (vCont;t, which every attach sends). gdb reads the
  // process's target description in between; a notification before that is
  // parsed with the new inferior's default architecture ("Remote register
  // badly formatted", and the attach fails). The leader stays stopped (its stop
  // is reported at the vCont;t); the other threads run on meanwhile, as
  // gdbserver lets them (after `attach&` gdb stops the leader only).
  std::vector<ResumeAction> run_others;
  for (const auto& t : target_.threads()) {
    if (t.id.pid != pid)
      continue;
    if (t.id.tid == pid)
      stopped_unreported_.insert(pid);
    else
      run_others.push_back({t.id, ResumeKind::Continue, 0});
  }
  if (!run_others.empty())
    if (auto r = target_.resume(run_others); !r)
      debug("resuming the attached threads failed: " + r.error().message);
  return "OK";
}

GdbServer::Reply GdbServer::handle_vkill(std::string_view packet) {
  auto v = hex::parse_u64(packet.substr(6));
  if (!v || *v > 0x7fffffff)
    return "E.malformed vKill packet";
  Pid pid = static_cast<Pid>(*v);
  killed_.insert(pid);
  if (auto r = target_.kill(pid); !r) {
    killed_.erase(pid);
    return "E." + r.error().message;
  }
  forget_process(pid, "was killed by gdb");
  if (last_stop_ && last_stop_->thread.pid == pid)
    last_stop_.reset();
  return "OK";
}

GdbServer::Reply GdbServer::handle_ctrl_c() {
  auto r = target_.interrupt(-1);
  return r ? "OK" : "E.interrupt failed: " + r.error().message;
}

GdbServer::Reply GdbServer::handle_kill() {
  for (Pid pid : target_.processes()) {
    killed_.insert(pid);
    (void)target_.kill(pid);
    forget_process(pid, "was killed by gdb");
  }
  last_stop_.reset();
  // Without the extended protocol gdbserver exits after 'k'; 'k' has no reply.
  if (!extended_)
    exit_requested_ = true;
  return std::nullopt;
}

// 'R': extended-remote restart (gdb with `set remote run-packet off`): kill
// everything and start the last program again; no reply ('?' follows).
GdbServer::Reply GdbServer::handle_restart() {
  if (!extended_)
    return std::nullopt;
  for (Pid pid : target_.processes()) {
    killed_.insert(pid);
    (void)target_.kill(pid);
    forget_process(pid, "was killed by gdb");
  }
  last_stop_.reset();
  std::fprintf(stderr, "GDBserver restarting\n");
  if (options_.launch.program.empty())
    return std::nullopt;
  if (auto pid = start_program(); !pid)
    std::fprintf(stderr, "%s\n", pid.error().message.c_str());
  return std::nullopt;
}

GdbServer::Reply GdbServer::handle_detach(std::string_view packet) {
  std::vector<Pid> pids;
  if (packet.size() > 1) {
    if (packet[1] != ';')
      return "E.malformed detach packet";
    auto v = hex::parse_u64(packet.substr(2));
    if (!v || *v > 0x7fffffff)
      return "E.malformed detach packet";
    pids.push_back(static_cast<Pid>(*v));
  } else {
    pids = target_.processes();
  }
  if (pids.empty())
    return "E.no process";
  for (Pid pid : pids) {
    // The run stops while the stub still controls the process: a collector that
    // patched its code (the jump pad) can put the original bytes back.
    if (engine_)
      engine_->on_process_detach(pid);
    if (auto r = target_.detach(pid); !r)
      return "E." + r.error().message;
    std::fprintf(stderr, "Detaching from process %d\n", pid);
    forget_process(pid, ""); // detached
    if (last_stop_ && last_stop_->thread.pid == pid)
      last_stop_.reset();
  }
  if (!extended_ && target_.processes().empty())
    exit_requested_ = true;
  return "OK";
}

GdbServer::Reply GdbServer::handle_set_thread(std::string_view packet) {
  if (packet.size() < 3 || (packet[1] != 'g' && packet[1] != 'c'))
    return "E.malformed H packet";
  auto id = parse_thread_id(packet.substr(2), current_pid());
  if (!id)
    return "E.malformed thread id";
  if (packet[1] == 'c') {
    cont_thread_ = *id;
    return "OK";
  }
  // A specific thread must exist; "any" needs at least one process.
  if (id->tid > 0) {
    if (!target_.thread_alive(*id))
      return "E01";
  } else if (id->pid != -1 && resolve_thread(*id).tid <= 0) {
    return "E01";
  }
  general_thread_ = *id;
  return "OK";
}

GdbServer::Reply GdbServer::handle_thread_alive(std::string_view packet) {
  auto id = parse_thread_id(packet.substr(1), current_pid());
  if (!id || id->tid <= 0)
    return "E01";
  return target_.thread_alive(*id) ? "OK" : "E01";
}

} // namespace gdbtrace
