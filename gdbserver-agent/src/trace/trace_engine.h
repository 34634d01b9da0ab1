// The trace engine: everything about gdb tracepoints that is not "how a hit is
// caught" and not "how a packet is spelled". Owns tracepoint definitions, trace
// state variables, the trace buffer (frames in gdb's tfile layout), the tfind
// index and run status; delegates probe installation to Collectors (ptrace,
// kernel module, eBPF).
//
// The server parses the tracepoint packets (server/trace_requests.h) and calls
// the typed operations below; it formats the replies. Operations that gdb may
// send in any order (a stray qTsV, QTFrame before any run, QTDP:- for an
// unknown tracepoint) answer with an error or an empty result, never assume an
// earlier packet.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/register_block.h"
#include "common/result.h"
#include "target/native_target.h"
#include "trace/collector.h"
#include "trace/trace_status.h"
#include "trace/tracepoint_parser.h"

namespace gdbtrace {

// QTDP header: the tracepoint without its actions.
struct TracepointDefinition {
  Tracepoint tp;     // number, address, enabled, step/pass, fast, condition
  bool more = false; // trailing '-': action packets follow
};

// One QTDP:- packet: actions for an already defined tracepoint.
struct ActionList {
  bool starts_stepping = false;     // 'S' prefix: these and later actions are step actions
  std::vector<TraceAction> actions; // verified
  std::vector<std::string> texts;   // one per action, as received (upload, re-definition)
  bool more = false;                // trailing '-': more action packets follow
};
struct TracepointActions {
  uint32_t number = 0;
  uint64_t address = 0;
  // The list, or why it did not parse; the engine decides what a bad list
  // means for the tracepoint (dropped, or refused as a changed re-definition).
  Result<ActionList> list = ActionList{};
};

// QTDPsrc: one source string of a tracepoint (replayed on upload).
struct TracepointSource {
  uint32_t number = 0;
  uint64_t address = 0;
  std::string type; // "at", "cond", "cmd"
  std::string text;
};

// QTFrame: which trace frame to select, searching forward from the selected one.
struct FrameQuery {
  enum Kind { Number, Pc, InRange, OutsideRange, Tracepoint, None } kind = None;
  uint64_t a = 0, b = 0; // frame number / pc / range start..end / tracepoint number
};
struct FrameHit {
  uint64_t frame = 0;
  uint32_t tracepoint = 0;
};

// QTNotes: only the fields present change.
struct TraceNotes {
  std::optional<std::string> user, notes, tstop;
};

// A tracepoint location's counters as qTP reports them.
struct TracepointCounts {
  uint64_t hits = 0, bytes = 0;
};

struct CollectorInfo {
  std::string name, description;
};

class TraceEngine {
public:
  struct Hooks {
    // Text for gdb's console (sent as 'O' packets when possible, else queued).
    std::function<void(const std::string&)> console;
    // The process tracepoints go into (the current inferior); -1 when none.
    std::function<Pid()> current_pid;
    // Optional: the target description XML, written into tfiles saved on the
    // target side (QTSave) so gdb reads their 'R' blocks with the right layout.
    // PRESENT (empty: all) names the registers the file's 'R' blocks hold; the
    // others must be numbered after them (see server/tdesc.h). LAYOUT: the
    // traced process's registers (amd64 or i386).
    std::function<std::string(const RegisterLayout& layout, const std::vector<bool>& present)>
        target_description;
    // Optional: called before an in-kernel collector probes ADDRESS in PID. A
    // software breakpoint gdb already has there (e.g. `set breakpoint
    // always-inserted on`) must leave its int3, which the kernel's uprobe would
    // adopt and consume; an error keeps the tracepoint off in-kernel collectors.
    std::function<Result<void>(Pid, uint64_t)> before_kernel_probe;
    // Optional: the stub's --debug log. The engine says there which collector
    // took each tracepoint and why the ones before it declined (what gdb's own
    // testsuite runs cannot ask `monitor gdbtrace status`).
    std::function<void(const std::string&)> debug;
  };

  TraceEngine(asio::io_context& io, NativeTarget& target, Hooks hooks);
  ~TraceEngine();

  // Collectors in preference order (module, eBPF, ptrace); the engine picks the
  // first whose check() accepts a tracepoint, and tells gdb's console when it
  // falls back.
  void add_collector(std::unique_ptr<Collector> collector);
  // An in-kernel collector that could not be created here, and why: when none
  // exists, every tstart says so on gdb's console (tracepoints then use the
  // 30-100x slower ptrace path) and the status reports carry it (`fallback`).
  void note_unavailable_collector(const std::string& name, const std::string& reason);

  // --- definitions (QTinit, QTDP, QTDPsrc, QTDV, QTro, QTEnable/QTDisable) ---
  // What bytecode in a definition may refer to now (registers; TSVs once running).
  VerifyEnv verify_env() const;
  void reset();
  Result<void> define_tracepoint(TracepointDefinition def);
  Result<void> add_actions(TracepointActions actions);
  Result<void> add_source(TracepointSource source);
  Result<void> define_tsv(TsvDefinition tsv);
  void set_readonly_regions(std::vector<std::pair<uint64_t, uint64_t>> regions);
  Result<void> set_tracepoint_enabled(uint32_t number, uint64_t address, bool enabled);

  // --- run control and settings ---
  Result<void> start();
  void stop();
  bool running() const;
  void set_disconnected_tracing(bool on);
  void set_circular(bool on);
  // nullopt: the default size.
  Result<void> set_buffer_size(std::optional<uint64_t> size);
  // The largest buffer set_buffer_size accepts (larger requests are clamped
  // with a console message); 0, the default: half of this machine's memory.
  // The fuzz harness models a small machine with it.
  void set_buffer_limit(uint64_t bytes);
  void set_notes(const TraceNotes& notes);
  // `monitor gdbtrace stacks on BYTES | off` (0): from the next install on,
  // every hit also records the registers and BYTES of stack from $sp
  // (trace/stack_actions.h).
  Result<void> set_stack_bytes(uint32_t bytes);
  uint32_t stack_bytes() const;
  // The process of the current (or last) run; -1 before any run.
  Pid traced_pid() const;

  // --- what gdb reads back ---
  // Drains the collectors first (and applies a stop they asked for), so the
  // report is never staler than the frames already produced.
  TraceReport report();
  Result<TracepointCounts> tracepoint_counts(uint32_t number, uint64_t address);
  // A TSV's value in the selected frame, else its live value; nullopt: unknown.
  std::optional<int64_t> tsv_value(uint32_t number);
  // Snapshots for the upload (qTfP/qTsP, qTfV/qTsV).
  std::vector<Tracepoint> tracepoints() const;
  std::vector<TsvDefinition> tsvs() const;
  // The frame stream: the buffer's frames in tfile layout, oldest first, as
  // qTBuffer, QTSave and qGdbtrace.frames hand it out. Its size after
  // draining; its bytes from OFFSET (at most LENGTH) given to SINK piece by
  // piece, as the buffer expands them (TraceBuffer::read_stream).
  uint64_t frame_stream_size();
  void read_frame_stream(uint64_t offset, uint64_t length,
                         const std::function<bool(std::span<const uint8_t>)>& sink) const;
  // Frames in the buffer after draining, and frame N of them in tfile layout
  // (a view of the buffer or of SCRATCH; empty past the end).
  uint64_t frame_count();
  std::span<const uint8_t> stream_frame(uint64_t n, std::vector<uint8_t>& scratch) const;
  Result<void> save(const std::string& path);
  // `monitor gdbtrace stream FILE` ("" = off): from now on (during a run) or
  // from the next tstart, every frame is also appended to FILE as it is
  // drained, and the trace buffer keeps only the newest frames instead of
  // stopping the run when full (docs/streaming.md). Each run rewrites FILE.
  Result<void> set_stream(const std::string& path);
  StreamReport stream_report() const;
  // Waits until the stream's writer has written every frame drained so far
  // (the file then holds them, and its status line counts them).
  void stream_settle();
  // By remote register number: whether every frame's 'R' block holds that
  // register (kernel collectors have no x87/SSE/AVX state). What `tsave -r`
  // keeps; a file keeping the whole block (plain tsave) shows the others as 0.
  std::vector<bool> registers_in_every_frame() const;

  // --- trace frame selection (QTFrame) ---
  std::optional<FrameHit> select_frame(const FrameQuery& query);
  bool frame_selected() const;
  // Registers of the selected frame (unknown registers not valid).
  RegisterBlock frame_registers() const;
  // The layout of the frames' 'R' blocks: the traced process's (amd64 or i386).
  RegisterLayout register_layout() const;
  // Memory of the selected frame: collected blocks, then QTro read-only
  // sections (read from the target), else an "unavailable" error.
  Result<size_t> frame_memory(uint64_t address, std::span<uint8_t> out) const;
  // qXfer:traceframe-info:read document for the selected frame.
  std::string traceframe_info_xml() const;

  // --- collectors (`monitor gdbtrace backend`) ---
  std::vector<CollectorInfo> collectors() const;
  const std::string& preferred_backend() const; // "" = auto
  // "" or "auto": first collector that accepts each tracepoint.
  Result<void> prefer_backend(std::string_view name);

  // --- lifecycle notifications from the server ---
  // The traced process PID ended; HOW says how, for people ("exited with code
  // 0", "was killed by SIGKILL", "was killed by gdb"). The run stops with
  // terror "process PID HOW": gdb's tstatus has no reason word for a process
  // that went away (stock gdbserver keeps the run "running" with nothing left
  // to trace), and "stopped by a tstop command" would name a command nobody
  // gave; gdb shows it as "Trace stopped by an error (process PID HOW)."
  void on_process_exit(Pid pid, const std::string& how);
  // gdb detached from PID: the run stops as gdbserver stops it at a detach
  // (stop_tracing with gdb connected: tstop), with the note "gdb detached from process PID".
  void on_process_detach(Pid pid);
  // The traced process exec'd: its tracepoint addresses mean nothing in the
  // new image, so the run stops (frames kept, the reason in tstatus, as terror
  // for the reason given at on_process_exit).
  void on_process_exec(Pid pid);
  // PID stopped (all of its threads, in all-stop): collectors may write code.
  void on_process_stopped(Pid pid);
  // gdb went away. With disconnected tracing on, the run continues; else it stops.
  void on_disconnect();

  // Why a software breakpoint (Z0) at ADDRESS cannot be an int3 now, or
  // nullopt. While an in-kernel collector probes an address, the kernel's
  // uprobe consumes the int3 trap there, so gdb's breakpoint would never report.
  std::optional<std::string> software_breakpoint_conflict(uint64_t address) const;
  // Moves the tracepoints an in-kernel collector probes at ADDRESS to the
  // ptrace collector for the rest of the run (counts carried over), so gdb's
  // software breakpoint can go there, or says why not (an explicit `monitor
  // gdbtrace backend`, a collector that cannot remove one probe, trace state
  // variables kept in the kernel). Used where no debug register can hold it.
  Result<void> move_to_trap_collector(uint64_t address);

  // Puts back, in BYTES read from process PID at ADDRESS, the program's own
  // bytes where a collector changed them: an in-kernel collector's uprobe
  // int3 (without this gdb reads an int3 at a tracepoint, takes it for a
  // breakpoint compiled into the program and "skips" it by moving the pc into
  // the middle of the instruction) and the jump pad's jmp (gdb would disassemble
  // and save as breakpoint shadow a jmp that goes away at tstop; gdbserver hides
  // its fast tracepoint jumps from reads too).
  void hide_collector_text(Pid pid, uint64_t address, std::span<uint8_t> bytes) const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace gdbtrace
