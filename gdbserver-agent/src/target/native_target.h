// The native-target interface: what the protocol layer may ask of a debugged
// process, independent of the Remote Serial Protocol.
//
// The server (server/) translates packets into these calls; the Linux ptrace
// implementation lives in target/linux_target.*. Nothing in here knows about
// packets, hex or gdb signal numbers (the server maps host <-> gdb signals).
//
// Threading model: everything runs on the asio io_context passed at
// construction. Child events (waitpid results) are produced by the target's own
// mechanism (signalfd/pidfd/waiter thread) and delivered by posting to that
// io_context; the EventHandler is always invoked on the io_context thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/register_block.h"
#include "common/register_layout.h"
#include "common/result.h"

namespace asio {
class io_context;
}

namespace gdbtrace {

using Pid = int;
using Tid = int;

struct ThreadId {
  Pid pid = 0;
  Tid tid = 0;
  bool operator==(const ThreadId&) const = default;
};

// Everything gdb can say about a process before starting it
// (vRun, QEnvironment*, QSetWorkingDir, QStartupWithShell, QDisableRandomization, --wrapper).
struct LaunchSpec {
  std::string program;
  std::vector<std::string> args;      // argv[1..]
  std::vector<std::string> env_set;   // "NAME=VALUE" to set over the server's environment
  std::vector<std::string> env_unset; // names to remove
  bool env_reset = false;             // QEnvironmentReset: start from the server's initial env
  std::string cwd;                    // empty: the server's cwd
  std::vector<std::string> wrapper;   // --wrapper argv, run as WRAPPER... PROG ARGS
  bool startup_with_shell = true;     // run via $SHELL -c "exec prog args"
  bool disable_randomization = true;
};

enum class StopKind {
  Signalled,  // thread stopped with a signal (incl. SIGTRAP for breakpoints/steps)
  Exited,     // process exited normally: exit_status
  Terminated, // process killed by signal: signal
  Forked,     // child_pid/child_tid hold the new process (stopped, not yet resumed)
  VForked,
  VForkDone,
  Execd,         // exec_path holds the new executable
  ThreadCreated, // only when thread events are enabled (QThreadEvents)
  ThreadExited,  // only when thread events are enabled; exit_status
  SyscallEntry,  // only for caught syscalls: syscall_number
  SyscallReturn,
  NoResumed, // nothing left running that could report an event
};

enum class StopReason { None, SwBreak, HwBreak, Watch, RWatch, AWatch, SingleStep };

struct StopEvent {
  StopKind kind = StopKind::Signalled;
  ThreadId thread;
  int signal = 0; // host signal number
  int exit_status = 0;
  StopReason reason = StopReason::None;
  uint64_t watch_address = 0;  // for Watch/RWatch/AWatch
  ThreadId child;              // Forked/VForked
  std::string exec_path;       // Execd
  int syscall_number = -1;     // SyscallEntry/SyscallReturn
  bool stop_requested = false; // non-stop: gdb asked this thread to stop (vCont;t) meanwhile
};

// Leave: the thread stays as it is (the stub's own: a non-stop thread whose
// stop gdb has not pulled yet must not be resumed by a wildcard action).
enum class ResumeKind { Continue, Step, Stop, RangeStep, Leave };

// One vCont action. thread.pid == -1: all processes; thread.tid == -1: all threads of pid.
struct ResumeAction {
  ThreadId thread{-1, -1};
  ResumeKind kind = ResumeKind::Continue;
  int signal = 0;           // host signal to deliver (0: none)
  uint64_t range_start = 0; // RangeStep: keep stepping while pc in [start, end)
  uint64_t range_end = 0;
};

enum class BreakpointType {
  Software = 0,
  Hardware = 1,
  WriteWatch = 2,
  ReadWatch = 3,
  AccessWatch = 4
};

struct LibraryInfo { // one entry of the svr4 link map
  std::string name;
  uint64_t lm = 0, l_addr = 0, l_ld = 0;
  uint64_t lmid = 0; // r_debug of its namespace (gdbserver's lmid attribute)
};

struct ThreadInfo {
  ThreadId id;
  std::string name; // /proc/pid/task/tid/comm
  int core = -1;
};

// Called when a thread hits a trace breakpoint (step_index 0) or finishes a
// while-stepping single-step (step_index >= 1). The thread is stopped; the
// callback may read registers/memory. Return true to single-step the thread
// once more (while-stepping), false to let it continue as it was resumed.
// Trace hits are never reported to gdb, and other threads keep running.
using TraceHitCallback = std::function<bool(ThreadId thread, uint64_t address, int step_index,
                                            const RegisterBlock& regs)>;

// How the instructions under our int3s were executed when a thread resumed
// from one (trace hits and gdb's breakpoints): in place, with only that thread
// paused (step_in_place.h), or by lifting the int3 for a single-step while
// every other thread of the process was stopped.
struct StepOverStats {
  uint64_t in_place = 0;
  uint64_t all_threads_stopped = 0;
};

class NativeTarget {
public:
  using EventHandler = std::function<void(const StopEvent&)>;
  virtual ~NativeTarget() = default;

  // Events reported to the protocol layer (stops, exits, forks, ...).
  virtual void set_event_handler(EventHandler handler) = 0;
  // Warnings for gdb's console about things that happened to the program
  // behind gdb's back (a breakpoint the kernel took out and the target put back).
  using NoticeHandler = std::function<void(const std::string&)>;
  virtual void set_notice_handler(NoticeHandler) {}

  // --- processes ---
  // Starts the program stopped at its first instruction (after the shell/wrapper exec'd it).
  virtual Result<Pid> create_inferior(const LaunchSpec& spec) = 0;
  virtual Result<void> attach(Pid pid) = 0; // stops all its threads
  // After attach: the signal the leader stopped with instead of the attach's
  // SIGSTOP (it had one pending), taken out of the events still to report, so
  // the attach's stop reply carries it as gdbserver's does. nullopt: none.
  virtual std::optional<int> take_attach_signal(Pid) { return std::nullopt; }
  virtual Result<void> detach(Pid pid) = 0; // removes our breakpoints, process keeps running
  virtual Result<void> kill(Pid pid) = 0;
  virtual std::vector<Pid> processes() const = 0;
  virtual bool is_attached(Pid pid) const = 0; // attached (vs. created by us): qAttached
  virtual std::vector<ThreadInfo> threads() const = 0;
  virtual bool thread_alive(ThreadId thread) const = 0;

  // --- execution control ---
  // all_stop: when one thread reports an event, stop every other thread first.
  virtual void set_non_stop(bool non_stop) = 0;
  virtual Result<void> resume(const std::vector<ResumeAction>& actions) = 0;
  // Stop every thread of PID (-1: all processes); in non-stop one event per thread follows.
  virtual Result<void> interrupt(Pid pid) = 0;
  // All-stop: a new gdb connection finds the program running (the previous gdb
  // vanished during a continue, e.g. with disconnected tracing): stop every
  // thread without reporting anything, as gdbserver's '?' does (pause_all).
  // Events already collected stay pending for the next resume. Returns true
  // when something was running.
  virtual bool pause_all() = 0;
  virtual void set_pass_signals(const std::vector<bool>& host_signals_to_pass) = 0;
  // QProgramSignals: signals gdb lets the program have; a detach passes on a
  // signal gdb was shown but never resumed with only if it is one of them.
  virtual void set_program_signals(const std::vector<bool>& host_signals) {}
  virtual void set_report_thread_events(bool enabled) = 0;
  // Syscall catching (QCatchSyscalls): empty list with enabled = catch all.
  virtual void set_catch_syscalls(Pid pid, bool enabled, const std::vector<int>& syscalls) = 0;
  // Fork/vfork/exec events are reported only when gdb asked for them (qSupported).
  virtual void set_fork_events(bool fork, bool vfork, bool exec) = 0;

  // --- state ---
  virtual Result<RegisterBlock> read_registers(ThreadId thread) = 0;
  virtual Result<void> write_registers(ThreadId thread,
                                       const RegisterBlock& regs) = 0; // only valid regs
  // Reads as much as possible; returns bytes read (0 with error when nothing readable).
  // Breakpoint instructions we inserted are hidden (original bytes shown).
  virtual Result<size_t> read_memory(Pid pid, uint64_t address, std::span<uint8_t> out) = 0;
  virtual Result<size_t> write_memory(Pid pid, uint64_t address, std::span<const uint8_t> data) = 0;
  virtual bool has_avx() const = 0; // tdesc includes org.gnu.gdb.i386.avx
  // The registers gdb sees for PID: amd64, or i386 for a 32-bit program (its
  // target description, 'g' layout and trace-frame 'R' blocks). An unknown
  // PID gets the host's (amd64) layout.
  virtual RegisterLayout register_layout(Pid pid) const { return {RegisterArch::Amd64, has_avx()}; }

  // --- breakpoints (gdb's Z/z packets) ---
  virtual Result<void> insert_breakpoint(Pid pid, BreakpointType type, uint64_t address,
                                         int kind) = 0;
  virtual Result<void> remove_breakpoint(Pid pid, BreakpointType type, uint64_t address,
                                         int kind) = 0;

  // --- trace breakpoints (ptrace collector) ---
  virtual Result<void> insert_trace_breakpoint(Pid pid, uint64_t address,
                                               TraceHitCallback callback) = 0;
  virtual Result<void> remove_trace_breakpoint(Pid pid, uint64_t address) = 0;
  // Since the target was created.
  virtual StepOverStats step_over_stats() const { return {}; }
  // When every thread of PID is stopped (in a ptrace-stop): a number that grows
  // whenever any thread resumes, so a caller that saw the same number before
  // knows PID has not run since. nullopt while any thread runs (or unknown).
  virtual std::optional<uint64_t> stopped_epoch(Pid) const { return std::nullopt; }

  // Code a collector put in PID (the jump pad's pads, [start, end)) that a step
  // gdb asks for must never stop in: a thread single-stepped into it is
  // stepped on until it leaves, so gdb's step (or range step) over a patched
  // site takes the site's instruction, as gdbserver moves threads out of its
  // jump pads. Kept for the process's life (the pads are never unmapped).
  virtual void add_step_through(Pid pid, uint64_t start, uint64_t end) {}

  // Makes a thread of PID (every thread stopped) run system call NUMBER with
  // ARGS (at most 6) and returns its raw result (-errno on failure), leaving
  // the thread's registers and the code as they were. CODE_ADDRESS: two bytes
  // of executable code the call may borrow for its `syscall` instruction.
  virtual Result<int64_t> inject_syscall(Pid pid, uint64_t code_address, long number,
                                         std::span<const uint64_t> args) {
    return make_error(ENOSYS, "this target cannot run system calls in the tracee");
  }

  // A collector's recovery from a fault of its own code in the tracee (the jump
  // pad's memory reads): at a SIGSEGV or SIGBUS the kernel raised for a fault
  // (not one sent by kill), the target asks FIXUP with the process and the
  // faulting pc; an address resumes the thread there with the signal
  // suppressed and nothing reported, nullopt lets the signal go on as before.
  // The target knows nothing else of the collector. One fixup; empty removes it.
  using FaultFixup = std::function<std::optional<uint64_t>(Pid pid, uint64_t pc)>;
  virtual void set_fault_fixup(FaultFixup fixup) {}

  // --- process information ---
  virtual Result<std::string> auxv(Pid pid) = 0;      // raw bytes
  virtual Result<std::string> exec_file(Pid pid) = 0; // /proc/pid/exe target
  virtual Result<std::vector<LibraryInfo>> libraries(Pid pid, uint64_t& r_debug_lm_out) = 0;

  // Raw siginfo_t (128 bytes, PTRACE_GETSIGINFO) of the signal THREAD stopped with, for
  // qXfer:siginfo:read ($_siginfo); write replaces it (PTRACE_SETSIGINFO) before the resume.
  // For qXfer:siginfo read/write; the defaults report "unsupported".
  virtual Result<std::string> read_siginfo(ThreadId thread) {
    return make_error(ENOSYS, "siginfo is not supported by this target");
  }
  virtual Result<void> write_siginfo(ThreadId thread, std::string_view data) {
    return make_error(ENOSYS, "siginfo is not supported by this target");
  }

  // Address of a thread-local variable for qGetTLSAddr: OFFSET into THREAD's
  // TLS block of the module whose link_map is at LM (0: the executable).
  virtual Result<uint64_t> tls_address(ThreadId thread, uint64_t offset, uint64_t lm) {
    return make_error(ENOSYS, "thread-local storage is not supported by this target");
  }
};

// Creates the Linux ptrace implementation.
std::unique_ptr<NativeTarget> make_linux_target(asio::io_context& io);

} // namespace gdbtrace
