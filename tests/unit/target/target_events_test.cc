// Tests of thread, fork, exec, signal and syscall events, attach/detach,
// trace breakpoints and non-stop mode against real child processes.
#include <gtest/gtest.h>

#include <csignal>
#include <cstring>
#include <map>
#include <set>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "target/native_target.h"
#include "target/proc_files.h"
#include "target_test_util.h"

extern char** environ;

namespace gdbtrace {
namespace {

using namespace std::chrono_literals;
using test::program_path;
using test::symbol_address;

const ResumeAction kContinueAll{{-1, -1}, ResumeKind::Continue, 0};

class TargetEventsTest : public ::testing::Test {
protected:
  void SetUp() override {
    target = make_linux_target(io);
    waiter = std::make_unique<test::EventWaiter>(io, *target);
    // Like gdb's QPassSignals default: SIGCHLD and friends pass silently.
    std::vector<bool> pass(65, false);
    pass[SIGCHLD] = pass[SIGWINCH] = pass[SIGURG] = true;
    target->set_pass_signals(pass);
  }
  void TearDown() override { target.reset(); }

  Pid launch(const std::string& prog, std::vector<std::string> args, bool shell = false) {
    return test::launch(*target, prog, std::move(args), shell);
  }
  void continue_all(int signal = 0) { test::continue_all(*target, signal); }
  StopEvent expect_event() {
    auto ev = waiter->next(20s);
    EXPECT_TRUE(ev.has_value()) << "no event";
    return ev.value_or(StopEvent{StopKind::NoResumed});
  }

  asio::io_context io;
  std::unique_ptr<NativeTarget> target;
  std::unique_ptr<test::EventWaiter> waiter;
};

TEST_F(TargetEventsTest, ThreadCreationAndExitAreReportedWhenEnabled) {
  target->set_report_thread_events(true);
  Pid pid = launch("threads", {"5"});
  std::set<Tid> created, exited;
  continue_all();
  for (;;) {
    StopEvent ev = expect_event();
    if (ev.kind == StopKind::ThreadCreated) {
      created.insert(ev.thread.tid);
      bool listed = false;
      for (const auto& t : target->threads())
        listed |= t.id == ev.thread;
      EXPECT_TRUE(listed);
    } else if (ev.kind == StopKind::ThreadExited) {
      exited.insert(ev.thread.tid);
    } else {
      EXPECT_EQ(ev.kind, StopKind::Exited);
      EXPECT_EQ(ev.exit_status, 0);
      break;
    }
    continue_all();
  }
  EXPECT_EQ(created.size(), 3u);
  EXPECT_EQ(exited, created);
  EXPECT_EQ(created.count(pid), 0u);
}

TEST_F(TargetEventsTest, ThreadsAreTrackedSilentlyAndNamed) {
  Pid pid = launch("threads", {"100000000"});
  uint64_t work = symbol_address(program_path("threads"), "thread_work");
  continue_all();
  waiter->pump(100ms);
  ASSERT_TRUE(target->interrupt(pid).ok());
  StopEvent ev = expect_event();
  EXPECT_EQ(ev.signal, SIGINT);
  auto threads = target->threads();
  EXPECT_EQ(threads.size(), 4u);
  std::set<std::string> names;
  for (const auto& t : threads) {
    names.insert(t.name);
    EXPECT_GE(t.core, 0);
    EXPECT_TRUE(target->thread_alive(t.id));
    EXPECT_TRUE(target->read_registers(t.id).ok()); // every thread is stopped
  }
  EXPECT_TRUE(names.count("worker0") && names.count("worker2")) << *names.begin();
  // A breakpoint every thread runs into: all-stop reports one at a time.
  ASSERT_TRUE(target->insert_breakpoint(pid, BreakpointType::Software, work, 1).ok());
  std::set<Tid> hitters;
  for (int i = 0; i < 6; i++) {
    continue_all();
    ev = expect_event();
    ASSERT_EQ(ev.reason, StopReason::SwBreak);
    hitters.insert(ev.thread.tid);
    auto regs = target->read_registers(ev.thread);
    ASSERT_TRUE(regs.ok());
    EXPECT_EQ(regs->pc(), work);
  }
  // Which threads hit depends on scheduling; each hitter is one of ours.
  for (Tid t : hitters)
    EXPECT_TRUE(target->thread_alive({pid, t}));
  ASSERT_TRUE(target->kill(pid).ok());
}

TEST_F(TargetEventsTest, ForkEventReportedAndChildDetachable) {
  target->set_fork_events(true, true, true);
  Pid pid = launch("forker", {"fork"});
  continue_all();
  StopEvent ev = expect_event();
  ASSERT_EQ(ev.kind, StopKind::Forked);
  EXPECT_EQ(ev.thread.pid, pid);
  Pid child = ev.child.pid;
  EXPECT_NE(child, pid);
  auto procs = target->processes();
  EXPECT_EQ(procs.size(), 2u);
  ASSERT_TRUE(target->read_registers(ev.child).ok());
  ASSERT_TRUE(target->detach(child).ok());
  continue_all();
  ev = expect_event();
  EXPECT_EQ(ev.kind, StopKind::Exited) << "signal " << ev.signal;
  EXPECT_EQ(ev.thread.pid, pid);
  EXPECT_EQ(ev.exit_status, 13);
}

TEST_F(TargetEventsTest, TwoProcessesAfterFollowedForkBothRunToExit) {
  target->set_fork_events(true, true, true);
  Pid pid = launch("forker", {"fork"});
  uint64_t fn = symbol_address(program_path("forker"), "child_func");
  ASSERT_TRUE(target->insert_breakpoint(pid, BreakpointType::Software, fn, 1).ok());
  continue_all();
  StopEvent ev = expect_event();
  ASSERT_EQ(ev.kind, StopKind::Forked);
  Pid child = ev.child.pid;
  // The child inherited the int3: it hits it as a process of its own.
  continue_all();
  ev = expect_event();
  ASSERT_EQ(ev.reason, StopReason::SwBreak);
  EXPECT_EQ(ev.thread.pid, child);
  ASSERT_TRUE(target->remove_breakpoint(child, BreakpointType::Software, fn, 1).ok());
  std::map<Pid, int> exits;
  while (exits.size() < 2) {
    continue_all();
    ev = expect_event();
    if (ev.kind == StopKind::Exited)
      exits[ev.thread.pid] = ev.exit_status;
    else if (ev.reason == StopReason::SwBreak)
      EXPECT_EQ(ev.thread.pid, pid); // the parent's own call after waitpid
    else
      ASSERT_EQ(ev.kind, StopKind::Exited) << "signal " << ev.signal;
  }
  EXPECT_EQ(exits[child], 3);
  EXPECT_EQ(exits[pid], 13);
}

TEST_F(TargetEventsTest, AttachToMultiThreadedProcessStopsAllThreads) {
  std::string prog = program_path("threads");
  char* argv[] = {prog.data(), (char*)"100000000", nullptr};
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, prog.c_str(), nullptr, nullptr, argv, environ), 0);
  usleep(100000);
  ASSERT_TRUE(target->attach(pid).ok());
  auto threads = target->threads();
  EXPECT_EQ(threads.size(), 4u);
  for (const auto& t : threads) {
    EXPECT_EQ(procfs::thread_state(pid, t.id.tid), 't');
    EXPECT_TRUE(target->read_registers(t.id).ok());
  }
  continue_all();
  waiter->pump(50ms);
  ASSERT_TRUE(target->interrupt(pid).ok());
  StopEvent ev = expect_event();
  EXPECT_EQ(ev.signal, SIGINT);
  ASSERT_TRUE(target->detach(pid).ok());
  usleep(20000);
  for (const auto& t : threads)
    EXPECT_NE(procfs::thread_state(pid, t.id.tid), 't');
  ::kill(pid, SIGKILL);
  int st;
  waitpid(pid, &st, 0);
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

TEST_F(TargetEventsTest, UnreportedForkDetachesChildWithoutBreakpoints) {
  for (const char* how : {"fork", "vfork"}) {
    Pid pid = launch("forker", {how});
    uint64_t fn = symbol_address(program_path("forker"), "child_func");
    ASSERT_TRUE(target->insert_breakpoint(pid, BreakpointType::Software, fn, 1).ok());
    continue_all();
    // Only the parent's call is reported; the child ran free and exited 3.
    StopEvent ev = expect_event();
    ASSERT_EQ(ev.reason, StopReason::SwBreak) << how;
    EXPECT_EQ(ev.thread.pid, pid);
    EXPECT_EQ(target->processes().size(), 1u);
    continue_all();
    ev = expect_event();
    EXPECT_EQ(ev.kind, StopKind::Exited);
    EXPECT_EQ(ev.exit_status, 13) << how;
  }
}

TEST_F(TargetEventsTest, ExecEventForgetsOldBreakpoints) {
  target->set_fork_events(false, false, true);
  Pid pid = launch("execer", {});
  uint64_t fn = symbol_address(program_path("execer"), "before_exec");
  ASSERT_TRUE(target->insert_breakpoint(pid, BreakpointType::Software, fn, 1).ok());
  continue_all();
  StopEvent ev = expect_event();
  ASSERT_EQ(ev.reason, StopReason::SwBreak);
  continue_all();
  ev = expect_event();
  ASSERT_EQ(ev.kind, StopKind::Execd);
  EXPECT_EQ(ev.thread, (ThreadId{pid, pid}));
  EXPECT_EQ(ev.exec_path, program_path("execer"));
  // The new image does not contain our int3 and the old breakpoint is gone.
  EXPECT_FALSE(target->remove_breakpoint(pid, BreakpointType::Software, fn, 1).ok());
  continue_all();
  ev = expect_event();
  EXPECT_EQ(ev.kind, StopKind::Exited);
  EXPECT_EQ(ev.exit_status, 5);
}

TEST_F(TargetEventsTest, ExecWithoutExecEventsIsASigtrap) {
  Pid pid = launch("execer", {});
  continue_all();
  StopEvent ev = expect_event();
  EXPECT_EQ(ev.kind, StopKind::Signalled);
  EXPECT_EQ(ev.signal, SIGTRAP);
  continue_all();
  ev = expect_event();
  EXPECT_EQ(ev.kind, StopKind::Exited);
  EXPECT_EQ(ev.exit_status, 5);
  (void)pid;
}

TEST_F(TargetEventsTest, SignalsReportedDeliveredOrPassed) {
  Pid pid = launch("basic", {"signal"});
  continue_all();
  int delivered = 0;
  for (int i = 0; i < 3; i++) {
    StopEvent ev = expect_event();
    ASSERT_EQ(ev.kind, StopKind::Signalled);
    ASSERT_EQ(ev.signal, SIGUSR1);
    auto si = target->read_siginfo(ev.thread);
    ASSERT_TRUE(si.ok());
    ASSERT_EQ(si->size(), sizeof(siginfo_t));
    EXPECT_EQ(reinterpret_cast<const siginfo_t*>(si->data())->si_signo, SIGUSR1);
    // Deliver the first two, suppress the third (gdb's "signal 0").
    int sig = i < 2 ? SIGUSR1 : 0;
    delivered += sig != 0;
    continue_all(sig);
  }
  StopEvent ev = expect_event();
  EXPECT_EQ(ev.kind, StopKind::Exited);
  EXPECT_EQ(ev.exit_status, delivered);

  // Passed signals never reach the handler of events.
  std::vector<bool> pass(65, false);
  pass[SIGUSR1] = pass[SIGCHLD] = true;
  target->set_pass_signals(pass);
  pid = launch("basic", {"signal"});
  continue_all();
  ev = expect_event();
  EXPECT_EQ(ev.kind, StopKind::Exited);
  EXPECT_EQ(ev.exit_status, 3);
}

TEST_F(TargetEventsTest, CatchSyscallsReportsEntryAndReturn) {
  Pid pid = launch("basic", {"syscall"});
  target->set_catch_syscalls(pid, true, {SYS_getppid});
  continue_all();
  StopEvent ev = expect_event();
  ASSERT_EQ(ev.kind, StopKind::SyscallEntry);
  EXPECT_EQ(ev.syscall_number, SYS_getppid);
  continue_all();
  ev = expect_event();
  ASSERT_EQ(ev.kind, StopKind::SyscallReturn);
  EXPECT_EQ(ev.syscall_number, SYS_getppid);
  auto regs = target->read_registers(ev.thread);
  ASSERT_TRUE(regs.ok());
  EXPECT_EQ(regs->get_u64(GT_RAX), (uint64_t)getpid());
  continue_all();
  ev = expect_event();
  EXPECT_EQ(ev.kind, StopKind::Exited);
  EXPECT_EQ(ev.exit_status, 4);
}

TEST_F(TargetEventsTest, AttachAndDetachLeaveProcessRunning) {
  std::string prog = program_path("basic");
  char* argv[] = {prog.data(), (char*)"spin", nullptr};
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, prog.c_str(), nullptr, nullptr, argv, environ), 0);
  usleep(50000);
  ASSERT_TRUE(target->attach(pid).ok());
  EXPECT_TRUE(target->is_attached(pid));
  EXPECT_EQ(procfs::thread_state(pid, pid), 't');
  uint64_t counter = symbol_address(prog, "counter");
  uint64_t fn = symbol_address(prog, "break_here");
  long a = 0, b = 0;
  ASSERT_TRUE(target->read_memory(pid, counter, {(uint8_t*)&a, 8}).ok());
  ASSERT_TRUE(target->insert_breakpoint(pid, BreakpointType::Software, fn, 1).ok());
  if (test::machine_delivers_debug_traps()) // else refused (target_test.cc checks that)
    ASSERT_TRUE(target->insert_breakpoint(pid, BreakpointType::WriteWatch, counter, 8).ok());
  ASSERT_TRUE(target->detach(pid).ok());
  EXPECT_TRUE(target->processes().empty());
  usleep(50000);
  char state = procfs::thread_state(pid, pid);
  EXPECT_TRUE(state == 'S' || state == 'R') << state;
  long tracer = -1;
  auto status = procfs::read_file("/proc/" + std::to_string(pid) + "/status");
  ASSERT_TRUE(status.ok());
  auto pos = status->find("TracerPid:");
  tracer = std::atol(status->c_str() + pos + 10);
  EXPECT_EQ(tracer, 0);
  // Still counting, and our int3 is no longer in its code.
  std::string mem = *procfs::read_file("/proc/" + std::to_string(pid) + "/cmdline");
  ::kill(pid, SIGKILL);
  int st;
  waitpid(pid, &st, 0);
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL); // it did not die of SIGTRAP
  (void)b;
}

TEST_F(TargetEventsTest, AttachToUnknownProcessFails) {
  auto r = target->attach(999999);
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(r.error().message.empty());
}

TEST_F(TargetEventsTest, TraceBreakpointCallbackRunsWhileOtherThreadsRun) {
  const long iters = 50;
  Pid pid = launch("threads", {std::to_string(iters)});
  uint64_t work = symbol_address(program_path("threads"), "thread_work");
  std::atomic<int> hits{0};
  std::set<Tid> tids;
  ASSERT_TRUE(target
                  ->insert_trace_breakpoint(
                      pid, work,
                      [&](ThreadId t, uint64_t addr, int step, const RegisterBlock& regs) {
                        EXPECT_EQ(step, 0);
                        EXPECT_EQ(addr, work);
                        EXPECT_EQ(regs.pc(), work);
                        tids.insert(t.tid);
                        hits++;
                        return false;
                      })
                  .ok());
  continue_all();
  StopEvent ev = expect_event(); // trace hits are never reported
  EXPECT_EQ(ev.kind, StopKind::Exited);
  EXPECT_EQ(ev.exit_status, 0);
  EXPECT_EQ(hits, 3 * iters);
  EXPECT_EQ(tids.size(), 3u);
  // thread_work begins with push %rbp: executed in place, no other thread stopped for it.
  EXPECT_EQ(target->step_over_stats().in_place, uint64_t(3 * iters));
  EXPECT_EQ(target->step_over_stats().all_threads_stopped, 0u);
}

// The instruction under a trace breakpoint is read once for the in-place step;
// gdb writing new code there must be seen at the next hit.
TEST_F(TargetEventsTest, InPlaceStepSeesCodeWrittenOverATraceBreakpoint) {
  Pid pid = launch("basic", {"loop", "3"});
  uint64_t fn = symbol_address(program_path("basic"), "break_here");
  uint64_t load = fn + 7; // mov -0x4(%rbp),%eax after push %rbp; mov %rsp,%rbp; mov %edi,-0x4(%rbp)
  uint8_t code[3] = {};
  ASSERT_TRUE(target->read_memory(pid, load, code).ok());
  ASSERT_EQ(std::vector<uint8_t>(code, code + 3), (std::vector<uint8_t>{0x8b, 0x45, 0xfc}));
  int hits = 0;
  ASSERT_TRUE(target
                  ->insert_trace_breakpoint(pid, load,
                                            [&](ThreadId, uint64_t, int, const RegisterBlock&) {
                                              hits++;
                                              return false;
                                            })
                  .ok());
  ASSERT_TRUE(target->insert_breakpoint(pid, BreakpointType::Software, fn, 1).ok());
  continue_all(); // break_here(0)
  StopEvent ev = expect_event();
  ASSERT_EQ(ev.reason, StopReason::SwBreak);
  continue_all(); // the trace hit of call 0 (its load emulated, then cached), stop in break_here(1)
  ev = expect_event();
  ASSERT_EQ(ev.reason, StopReason::SwBreak);
  EXPECT_EQ(hits, 1);
  StepOverStats before = target->step_over_stats();
  // xor %eax,%eax; nop: not emulated, so the next steps over it must stop all threads.
  const uint8_t xor_eax[3] = {0x31, 0xc0, 0x90};
  ASSERT_TRUE(target->write_memory(pid, load, xor_eax).ok());
  ASSERT_TRUE(target->remove_breakpoint(pid, BreakpointType::Software, fn, 1).ok());
  continue_all();
  ev = expect_event();
  EXPECT_EQ(ev.kind, StopKind::Exited);
  EXPECT_EQ(ev.exit_status, 7);
  EXPECT_EQ(hits, 3);
  EXPECT_EQ(target->step_over_stats().all_threads_stopped - before.all_threads_stopped, 2u);
}

TEST_F(TargetEventsTest, TraceBreakpointWhileSteppingAndSharedUserBreakpoint) {
  Pid pid = launch("basic", {"loop", "3"});
  uint64_t fn = symbol_address(program_path("basic"), "break_here");
  std::vector<std::pair<int, uint64_t>> calls;
  ASSERT_TRUE(
      target
          ->insert_trace_breakpoint(pid, fn,
                                    [&](ThreadId, uint64_t, int step, const RegisterBlock& regs) {
                                      calls.push_back({step, regs.pc()});
                                      return step < 2; // two while-stepping steps
                                    })
          .ok());
  // Reads show the original byte, not the int3.
  uint8_t byte = 0;
  ASSERT_TRUE(target->read_memory(pid, fn, {&byte, 1}).ok());
  EXPECT_NE(byte, 0xcc);
  continue_all();
  StopEvent ev = expect_event();
  EXPECT_EQ(ev.kind, StopKind::Exited);
  EXPECT_EQ(ev.exit_status, 7);
  ASSERT_EQ(calls.size(), 9u);
  for (int hit = 0; hit < 3; hit++) {
    EXPECT_EQ(calls[hit * 3].first, 0);
    EXPECT_EQ(calls[hit * 3].second, fn);
    EXPECT_EQ(calls[hit * 3 + 1].first, 1);
    EXPECT_GT(calls[hit * 3 + 1].second, fn);
    EXPECT_EQ(calls[hit * 3 + 2].first, 2);
  }

  // With gdb's Z0 at the same address: callback first, then a normal report.
  calls.clear();
  pid = launch("basic", {"loop", "2"});
  ASSERT_TRUE(
      target
          ->insert_trace_breakpoint(pid, fn,
                                    [&](ThreadId, uint64_t, int step, const RegisterBlock& regs) {
                                      calls.push_back({step, regs.pc()});
                                      return false;
                                    })
          .ok());
  ASSERT_TRUE(target->insert_breakpoint(pid, BreakpointType::Software, fn, 1).ok());
  continue_all();
  ev = expect_event();
  ASSERT_EQ(ev.reason, StopReason::SwBreak);
  EXPECT_EQ(calls.size(), 1u);
  // gdb's own step-over (z0, step, Z0) must not run the callback again.
  ASSERT_TRUE(target->remove_breakpoint(pid, BreakpointType::Software, fn, 1).ok());
  ASSERT_TRUE(target->resume({{ev.thread, ResumeKind::Step, 0}}).ok());
  ev = expect_event();
  EXPECT_EQ(ev.reason, StopReason::SingleStep);
  EXPECT_EQ(calls.size(), 1u);
  ASSERT_TRUE(target->insert_breakpoint(pid, BreakpointType::Software, fn, 1).ok());
  continue_all();
  ev = expect_event();
  ASSERT_EQ(ev.reason, StopReason::SwBreak);
  EXPECT_EQ(calls.size(), 2u);
  ASSERT_TRUE(target->remove_trace_breakpoint(pid, fn).ok());
  ASSERT_TRUE(target->remove_breakpoint(pid, BreakpointType::Software, fn, 1).ok());
  continue_all();
  ev = expect_event();
  EXPECT_EQ(ev.kind, StopKind::Exited);
  EXPECT_EQ(calls.size(), 2u);
}

TEST_F(TargetEventsTest, LibrariesFromTheLinkMap) {
  Pid pid = launch("basic", {"loop", "1"});
  uint64_t main_lm = 1;
  auto libs = target->libraries(pid, main_lm);
  ASSERT_TRUE(libs.ok()) << libs.error().message;
  EXPECT_TRUE(libs->empty()); // ld.so has not run yet
  uint64_t fn = symbol_address(program_path("basic"), "break_here");
  ASSERT_TRUE(target->insert_breakpoint(pid, BreakpointType::Software, fn, 1).ok());
  continue_all();
  ASSERT_EQ(expect_event().reason, StopReason::SwBreak);
  libs = target->libraries(pid, main_lm);
  ASSERT_TRUE(libs.ok());
  EXPECT_NE(main_lm, 0u);
  bool libc = false;
  for (const auto& l : *libs) {
    libc |= l.name.find("libc.so.6") != std::string::npos;
    EXPECT_NE(l.lm, 0u);
    EXPECT_NE(l.l_ld, 0u);
    EXPECT_NE(l.lmid, 0u);
  }
  EXPECT_TRUE(libc);
}

TEST_F(TargetEventsTest, NonStopStopsOnlyTheEventThread) {
  target->set_non_stop(true);
  Pid pid = launch("threads", {"100000000"});
  continue_all();
  waiter->pump(100ms);
  uint64_t work = symbol_address(program_path("threads"), "thread_work");
  // Inserting while threads run is allowed in non-stop.
  ASSERT_TRUE(target->insert_breakpoint(pid, BreakpointType::Software, work, 1).ok());
  StopEvent ev = expect_event();
  ASSERT_EQ(ev.reason, StopReason::SwBreak);
  ThreadId stopped = ev.thread;
  ASSERT_TRUE(target->remove_breakpoint(pid, BreakpointType::Software, work, 1).ok());
  // Drain other threads' hits that raced with the removal.
  while (auto more = waiter->next(200ms)) {
    ASSERT_EQ(more->reason, StopReason::SwBreak);
  }
  int running = 0;
  for (const auto& t : target->threads())
    if (!target->read_registers(t.id).ok())
      running++;
  EXPECT_GE(running, 1); // the others kept going
  // vCont;t on everything: one signal-0 stop per running thread.
  ASSERT_TRUE(target->interrupt(pid).ok());
  int zero_stops = 0;
  while (auto more = waiter->next(500ms)) {
    EXPECT_EQ(more->signal, 0);
    zero_stops++;
  }
  EXPECT_EQ(zero_stops, running);
  (void)stopped;
  ASSERT_TRUE(target->kill(pid).ok());
}

} // namespace
} // namespace gdbtrace
