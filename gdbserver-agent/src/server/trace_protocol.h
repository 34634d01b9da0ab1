// The tracepoint packets (QT*, qT*, qGdbtrace.*) as rows of the server's
// packet table: each handler parses its request (trace_requests.h), calls one
// TraceEngine operation and formats the reply as gdbserver 13 does.
//
// The upload cursors (qTfP/qTsP, qTfV/qTsV) are protocol state and live here,
// over a snapshot taken by the "first" packet: a "subsequent" packet without a
// "first" before it, or after the definitions changed, answers from that
// snapshot or with "l" (end of list) — never from freed state.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "server/packet_table.h"
#include "trace/trace_engine.h"
#include "unwind/stack_unwinder.h"

namespace gdbtrace {

class TraceProtocol {
public:
  // CONSOLE: text for gdb's console (why a definition was refused: gdb itself
  // shows only "Target returned error").
  TraceProtocol(TraceEngine& engine, std::function<void(const std::string&)> console)
      : engine_(engine), console_(std::move(console)) {}

  // The rows for the packet table (handlers refer to this object).
  std::vector<PacketRow> rows();

  // A new connection starts with no upload in progress.
  void reset_cursors();

  // The target stopped a thread of PID (any event but its exit). With stacks
  // on, the module list is read again: libraries the run's frames may come
  // from load at such stops (gdb's shared-library event breakpoint), and a
  // process that exits takes its /proc/PID/maps with it.
  void on_process_stopped(int pid);

private:
  // The packets that touch protocol state (the rest are free functions over
  // the engine, in trace_protocol.cc).
  Reply qtinit(const Packet&);
  Reply qtdp(const Packet& p);
  Reply upload_tracepoint(bool first);
  Reply upload_tsv(bool first);
  Reply qtstart(const Packet&);
  Reply qtstop(const Packet&);
  Reply gdbtrace_stacks(const Packet& p);

  TraceEngine& engine_;
  std::function<void(const std::string&)> console_;

  // qTfP/qTsP: the tracepoint being uploaded and the next piece of it.
  struct TracepointCursor {
    std::vector<Tracepoint> snapshot;
    size_t tp = 0;
    bool header_sent = false;
    size_t action = 0, step = 0, source = 0;
  } tp_cursor_;
  // qGdbtrace.stacks: the unwinder (module list cached from QTStart on, so
  // frames unwind after the process exited).
  StackUnwinder unwinder_;
  // qTfV/qTsV: the next variable to upload.
  struct TsvCursor {
    std::vector<TsvDefinition> snapshot;
    size_t next = 0;
  } tsv_cursor_;
};

} // namespace gdbtrace
