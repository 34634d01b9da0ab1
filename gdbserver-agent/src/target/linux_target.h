// The Linux x86-64 ptrace implementation of NativeTarget.
//
// Model (after gdbserver's linux-low): every traced thread is an Lwp. A wait
// status collected from the kernel is kept *raw* on its Lwp until the thread
// is one gdb wants running; then it is interpreted: internal events (clone,
// our SIGSTOPs, trace-breakpoint hits, passed signals, range stepping,
// unreported forks) are handled silently and the thread resumed; the rest
// become reports. In all-stop mode reporting one event first stops every other
// thread (their own events stay pending for later resumes).
//
// All ptrace calls happen on the io_context thread: SIGCHLD is blocked and
// read from a signalfd watched by asio; waitpid(-1, WNOHANG|__WALL) then
// collects statuses.
#pragma once

#include <array>
#include <asio.hpp>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <signal.h>
#include <sys/user.h>
#include <vector>

#include "target/debug_registers.h"
#include "target/inferior_memory.h"
#include "target/native_target.h"
#include "target/thread_db.h"

namespace gdbtrace {

// What a SIGTRAP meant, decided when it was collected (the pc is rewound at
// once for our int3 so a later breakpoint removal cannot confuse us).
enum class TrapKind { None, SwBreak, HwBreak, Watch, AccessWatch, Step, Other };

struct Lwp {
  Tid tid = 0;
  bool running = false;          // resumed in the kernel (not in a ptrace-stop)
  bool resumed = false;          // gdb considers it running (no stop reported since)
  bool stop_expected = false;    // a SIGSTOP we sent is still to be absorbed
  bool report_stop_zero = false; // non-stop vCont;t / interrupt: report its stop as signal 0
  // A leader that exited before its threads: a zombie that reports nothing
  // until the whole group ends. Not listed, never reported for (gdbserver
  // drops it too); its tid only comes back through an exec.
  bool zombie = false;
  std::optional<int> raw; // collected wait status, not interpreted yet
  TrapKind trap = TrapKind::None;
  uint64_t trap_address = 0;       // breakpoint or watched address
  std::optional<StopEvent> report; // interpreted, waiting to be reported to gdb

  ResumeKind kind = ResumeKind::Continue;
  int pending_signal = 0; // to deliver on the next real resume
  int attach_signal = 0;  // reported as the attach's stop, not resumed yet (detach passes it)
  uint64_t range_start = 0, range_end = 0;

  bool at_breakpoint = false; // stopped by executing our int3 at breakpoint_pc
  uint64_t breakpoint_pc = 0;
  bool debug_regs_dirty = false;
  int syscall_nr = -1; // from the last syscall-entry stop
  // The last resume was PTRACE_SINGLESTEP: a SIGTRAP the thread sent itself
  // then ends that step (see classify_trap).
  bool single_stepped = false;
};

struct SwBreakpoint {
  uint8_t original = 0;
  bool user = false;      // gdb's Z0
  TraceHitCallback trace; // ptrace collector
  // The instruction bytes at the address (int3s replaced by their shadows),
  // read at the first in-place step; forgotten when gdb writes memory there.
  std::array<uint8_t, 16> insn{};
  uint8_t insn_len = 0;
  uint32_t rearmed = 0; // times the kernel took it out and it was put back (linux_target_rearm.cc)
  // The code from the address on as it was inserted (the int3 first): put
  // back only where the same code is still mapped (linux_target_rearm.cc).
  // Forgotten (code_len 0) when gdb writes memory there.
  static constexpr size_t kCodeWindow = 32;
  std::array<uint8_t, kCodeWindow> code{};
  uint8_t code_len = 0;
  bool wanted() const { return user || trace != nullptr; }
};

struct Process {
  Pid pid = 0;
  bool attached = false;
  // A fork child whose parent's fork event gdb has not been told about yet
  // (another thread's stop was reported first). gdbserver holds it likewise:
  // not listed, not resumed by wildcard actions, never reported, until the
  // parent's event is; detached or killed with the parent.
  Pid unreported_fork_of = 0;
  std::map<Tid, Lwp> lwps;
  std::map<uint64_t, SwBreakpoint> breakpoints; // inserted int3s (original bytes)
  DebugRegisters debug_regs;
  InferiorMemory memory;
  bool catch_syscalls = false;
  std::vector<int> syscalls;             // empty: all
  bool vfork_breakpoints_lifted = false; // unreported vfork: int3s removed until vfork-done
  // Where int3s used to be: a thread that executed one just before its removal
  // reports the SIGTRAP afterwards (non-stop); it is rewound and resumed silently.
  std::set<uint64_t> removed_breakpoints;
  std::unique_ptr<ThreadDb> thread_db; // loaded on the first TLS request
  // From the executable's ELF header, at creation, attach and exec.
  RegisterArch arch = RegisterArch::Amd64;
  // Collector code a step never stops in (NativeTarget::add_step_through): start -> end.
  std::map<uint64_t, uint64_t> step_through;
};

// The architecture of PID's executable (amd64 when it cannot be read).
RegisterArch executable_arch(Pid pid);

class LinuxTarget final : public NativeTarget {
public:
  explicit LinuxTarget(asio::io_context& io);
  ~LinuxTarget() override;

  void set_event_handler(EventHandler handler) override { handler_ = std::move(handler); }
  void set_notice_handler(NoticeHandler handler) override { notice_ = std::move(handler); }

  Result<Pid> create_inferior(const LaunchSpec& spec) override;
  Result<void> attach(Pid pid) override;
  Result<void> detach(Pid pid) override;
  Result<void> kill(Pid pid) override;
  std::vector<Pid> processes() const override;
  bool is_attached(Pid pid) const override;
  std::vector<ThreadInfo> threads() const override;
  bool thread_alive(ThreadId thread) const override;

  void set_non_stop(bool non_stop) override { non_stop_ = non_stop; }
  Result<void> resume(const std::vector<ResumeAction>& actions) override;
  Result<void> interrupt(Pid pid) override;
  bool pause_all() override;
  void set_program_signals(const std::vector<bool>& host_signals) override {
    program_signals_ = host_signals;
  }
  void set_pass_signals(const std::vector<bool>& host_signals_to_pass) override {
    pass_signals_ = host_signals_to_pass;
  }
  void set_report_thread_events(bool enabled) override { report_thread_events_ = enabled; }
  void set_catch_syscalls(Pid pid, bool enabled, const std::vector<int>& syscalls) override;
  void set_fork_events(bool fork, bool vfork, bool exec) override {
    report_fork_ = fork;
    report_vfork_ = vfork;
    report_exec_ = exec;
  }

  Result<RegisterBlock> read_registers(ThreadId thread) override;
  Result<void> write_registers(ThreadId thread, const RegisterBlock& regs) override;
  Result<size_t> read_memory(Pid pid, uint64_t address, std::span<uint8_t> out) override;
  Result<size_t> write_memory(Pid pid, uint64_t address, std::span<const uint8_t> data) override;
  bool has_avx() const override { return avx_; }
  RegisterLayout register_layout(Pid pid) const override;

  Result<void> insert_breakpoint(Pid pid, BreakpointType type, uint64_t address, int kind) override;
  Result<void> remove_breakpoint(Pid pid, BreakpointType type, uint64_t address, int kind) override;
  Result<void> insert_trace_breakpoint(Pid pid, uint64_t address,
                                       TraceHitCallback callback) override;
  Result<void> remove_trace_breakpoint(Pid pid, uint64_t address) override;
  StepOverStats step_over_stats() const override { return step_over_stats_; }
  std::optional<uint64_t> stopped_epoch(Pid pid) const override;
  void add_step_through(Pid pid, uint64_t start, uint64_t end) override;
  void set_fault_fixup(FaultFixup fixup) override { fault_fixup_ = std::move(fixup); }
  Result<int64_t> inject_syscall(Pid pid, uint64_t code_address, long number,
                                 std::span<const uint64_t> args) override; // inject_syscall.cc

  Result<std::string> auxv(Pid pid) override;
  Result<std::string> exec_file(Pid pid) override;
  Result<std::vector<LibraryInfo>> libraries(Pid pid, uint64_t& r_debug_lm_out) override;
  Result<std::string> read_siginfo(ThreadId thread) override;
  std::optional<int> take_attach_signal(Pid pid) override;
  Result<void> write_siginfo(ThreadId thread, std::string_view data) override;
  Result<uint64_t> tls_address(ThreadId thread, uint64_t offset, uint64_t lm) override;

private:
  // --- bookkeeping (linux_target.cc) ---
  Process* find_process(Pid pid);
  const Process* find_process(Pid pid) const;
  Lwp* find_lwp(Tid tid, Process** owner = nullptr);
  Result<Lwp*> stopped_lwp(ThreadId thread);
  Process& add_process(Pid pid, bool attached);
  void remove_process(Pid pid);
  bool hidden(const Process& p) const { return p.unreported_fork_of != 0; }
  void release_unreported_forks(Pid parent, bool kill_them);
  void release_children_of_pending_events(Process& p, bool kill_them);
  void
  publish_crash_table(); // after every change of processes (int3s: crash_cleanup::breakpoint_*)
  void reveal_fork_child(const StopEvent& ev);
  Result<void> set_ptrace_options(Tid tid, bool attached);
  Result<void> insert_int3(Process& p, uint64_t address);
  Result<void> remove_int3(Process& p, uint64_t address);
  Result<void> release_sw_breakpoint(Process& p, uint64_t address);
  void lift_all_int3(Process& p);    // write original bytes back, keep the list
  void restore_all_int3(Process& p); // put int3s back after lift_all_int3
  Result<void> update_debug_registers(Process& p, const DebugRegisters& next);
  bool int3_inserted(const Process& p, uint64_t address) const;
  // int3s a uprobe of another program took out, put back (linux_target_rearm.cc).
  void rearm_wiped_int3(Process& p);
  void check_breakpoints_later();

  // --- events and execution control: statuses collected and dispatched
  // (linux_target_wait.cc), interpreted (linux_target_stops.cc), threads resumed
  // and stopped (linux_target_resume.cc) ---
  void arm_signalfd();
  void on_sigchld();
  // SIGCHLD: called from the signalfd (a round that reaps nothing may mean a zombie leader).
  void collect_statuses(bool sigchld = false);
  bool note_zombie_leaders();
  void check_leaders_later();
  void drop_stale_report(Process& p, Lwp& l);
  void store_status(Process& p, Lwp& l, int status);
  void classify_trap(Process& p, Lwp& l);
  void take_over_exec_thread(Process& p, Lwp& leader);
  void post_dispatch();
  void dispatch();
  std::optional<StopEvent> interpret(Process& p, Lwp& l);
  std::optional<StopEvent> on_exit_status(Process& p, Lwp& l, int status);
  std::optional<StopEvent> on_ptrace_event(Process& p, Lwp& l, int event);
  std::optional<StopEvent> on_new_thread(Process& p, Lwp& parent);
  std::optional<StopEvent> on_fork(Process& p, Lwp& parent, bool vfork);
  std::optional<StopEvent> on_exec(Process& p, Lwp& l);
  std::optional<StopEvent> on_syscall_stop(Process& p, Lwp& l);
  std::optional<StopEvent> on_trap(Process& p, Lwp& l);
  bool fixed_up_fault(Process& p, Lwp& l, int sig); // set_fault_fixup's recovery
  enum class TraceOutcome { Continue, Report, EventPending, Gone };
  // *REGS: the thread's general registers when it returns Continue, as read last (the
  // callback only reads), if that read worked.
  TraceOutcome run_trace_hit(Pid pid, Tid tid, uint64_t address,
                             std::optional<user_regs_struct>* regs);
  int wait_new_child(Tid tid);
  // KNOWN: the thread's general registers when the caller has just read them and nothing
  // changed them since (saves two ptrace calls per trace hit).
  void resume_lwp(Process& p, Lwp& l, const user_regs_struct* known = nullptr);
  bool step_over_breakpoint(Process& p, Lwp& l, int signal,
                            const user_regs_struct* known = nullptr);
  bool step_over_in_place(Process& p, Lwp& l, const user_regs_struct* known);
  bool single_step_sync(Process& p, Lwp& l, int signal);
  void back_to_sigstop(Process& p, Lwp& l); // inject_syscall.cc
  Result<int64_t> inject_syscall_once(Pid pid, uint64_t code_address, long number,
                                      std::span<const uint64_t> args); // inject_syscall.cc
  std::vector<Tid> stop_threads(Process& p, const Lwp* except);
  void stop_all_processes();
  void wait_for_stop(Process& p, Lwp& l);
  void restart_threads(Pid pid, const std::vector<Tid>& tids);
  void request_stop(Process& p, Lwp& l);
  void stop_for_gdb(Process& p, Lwp& l);
  void interpret_pending();
  bool interrupt_all_stop(std::vector<StopEvent>& out);
  std::optional<StopEvent> interrupt_event() const;
  bool interrupt_due() const;
  void place_report(const StopEvent& ev);
  std::optional<StopEvent> take_report();
  bool anything_running() const;
  bool pass_signal(int sig) const {
    return sig > 0 && sig < (int)pass_signals_.size() && pass_signals_[sig];
  }
  // Without QProgramSignals, gdb's defaults: everything but SIGTRAP and SIGINT.
  bool program_signal(int sig) const {
    if (program_signals_.empty())
      return sig != SIGTRAP && sig != SIGINT;
    return sig > 0 && sig < (int)program_signals_.size() && program_signals_[sig];
  }

  asio::io_context& io_;
  std::shared_ptr<int> life_ = std::make_shared<int>(0); // posted handlers check it
  asio::posix::stream_descriptor sigchld_;
  sigset_t child_sigmask_{}; // the mask inferiors start with
  bool avx_ = false;
  EventHandler handler_;
  std::map<Pid, std::unique_ptr<Process>> procs_;
  std::map<Tid, int> unknown_stops_; // stops of new clones/forks seen before their parent's event
  std::deque<StopEvent> orphan_reports_; // reports whose thread no longer exists (exits)
  Tid last_reported_tid_ = 0; // all-stop: pick pending reports round-robin (no starvation)

  bool non_stop_ = false;
  bool reported_ = true; // all-stop: a stop was reported and gdb has not resumed
  bool waiting_ = false; // a resume happened and no event has been reported since
  // All-stop ^C not answered yet. An event collected before it is reported
  // first and the interrupt waits for the next resume, as gdbserver's SIGINT
  // stays queued in the process.
  bool interrupt_requested_ = false;
  // The process started or attached last: an all-stop ^C is reported for it,
  // as gdbserver's SIGINT goes to that process's group (signal_pid).
  Pid interrupt_pid_ = 0;
  bool dispatching_ = false, redispatch_ = false, dispatch_posted_ = false;
  // A SIGCHLD came with nothing to reap and a leader could not be checked yet
  // (other threads ran): check at the next statuses (note_zombie_leaders).
  bool zombie_suspect_ = false;
  asio::steady_timer leader_check_{io_};
  bool leader_check_armed_ = false;
  asio::steady_timer breakpoint_check_{io_};
  bool breakpoint_check_armed_ = false;
  NoticeHandler notice_;
  std::vector<bool> pass_signals_;
  std::vector<bool> program_signals_;
  bool report_thread_events_ = false;
  bool report_fork_ = false, report_vfork_ = false, report_exec_ = false;
  StepOverStats step_over_stats_;
  uint64_t run_epoch_ = 0; // counts thread resumes (stopped_epoch)
  FaultFixup fault_fixup_;
};

} // namespace gdbtrace
