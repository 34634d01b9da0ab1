// The trace engine: everything about gdb tracepoints that is not "how a hit is
// caught". Owns tracepoint definitions, trace state variables, the trace buffer
// (frames in gdb's tfile layout), the tfind index and run status; delegates
// probe installation to Collectors (ptrace, kernel module, eBPF).
//
// The server forwards every tracepoint packet (QT*, qT*) here and asks the
// engine for register/memory contents while a trace frame is selected.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "common/register_block.h"
#include "common/result.h"
#include "target/native_target.h"
#include "trace/collector.h"

namespace gdbtrace {

class TraceEngine {
public:
  struct Hooks {
    // Text for gdb's console (sent as 'O' packets when possible, else queued).
    std::function<void(const std::string&)> console;
    // The process tracepoints go into (the current inferior); -1 when none.
    std::function<Pid()> current_pid;
    // Optional: the target description XML, written into tfiles saved on the
    // target side (QTSave) so gdb reads their 'R' blocks with the right layout.
    std::function<std::string()> target_description;
  };

  TraceEngine(asio::io_context& io, NativeTarget& target, Hooks hooks);
  ~TraceEngine();

  // Collectors in preference order (module, eBPF, ptrace); the engine picks the
  // first whose check() accepts a tracepoint, and tells gdb's console when it
  // falls back.
  void add_collector(std::unique_ptr<Collector> collector);

  // Feature string fragment for qSupported (";ConditionalTracepoints+;...").
  std::string supported_features() const;

  // Handles QT*/qT* packets and gdbtrace's own qGdbtrace.* packets (payload
  // without '$'/checksum). Returns std::nullopt when PACKET is not one of
  // these; otherwise the reply payload (may be binary: the codec escapes it).
  //   qGdbtrace.status            -> hex-encoded JSON status (plugin `gdbtrace status`)
  //   qGdbtrace.frames:OFF,LEN    -> 'm'|'l' + raw bytes of the frame stream (concatenated
  //                                  tfile frames, oldest first) from byte OFF; 'l' = last chunk
  std::optional<std::string> handle_packet(std::string_view packet);

  // `monitor gdbtrace ...` commands; nullopt when not ours.
  std::optional<std::string> handle_monitor(std::string_view command);

  // --- trace frame selection (QTFrame) ---
  bool frame_selected() const;
  // Registers of the selected frame (unknown registers not valid).
  RegisterBlock frame_registers() const;
  // Memory of the selected frame: collected blocks, then QTro read-only
  // sections (read from the target), else an "unavailable" error.
  Result<size_t> frame_memory(uint64_t address, std::span<uint8_t> out) const;
  // qXfer:traceframe-info:read document for the selected frame.
  std::string traceframe_info_xml() const;

  // --- lifecycle notifications from the server ---
  void on_process_exit(Pid pid);
  // The traced process exec'd: its tracepoint addresses mean nothing in the
  // new image, so the run stops (frames kept, the reason in tstatus).
  void on_process_exec(Pid pid);
  // gdb went away. With disconnected tracing on, the run continues; else it stops.
  void on_disconnect();
  bool running() const;

  // Why a software breakpoint (Z0) at ADDRESS cannot be an int3 now, or
  // nullopt. While an in-kernel collector probes an address, the kernel's
  // uprobe consumes the int3 trap there, so gdb's breakpoint would never report.
  std::optional<std::string> software_breakpoint_conflict(uint64_t address) const;

  // Puts back, in BYTES read from process PID at ADDRESS, the program's own
  // bytes where an in-kernel collector's uprobe changed them. Without this gdb
  // reads an int3 at a tracepoint, takes it for a breakpoint compiled into the
  // program and "skips" it by moving the pc into the middle of the instruction.
  void hide_kernel_probes(Pid pid, uint64_t address, std::span<uint8_t> bytes) const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace gdbtrace
