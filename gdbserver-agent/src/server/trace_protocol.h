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

private:
  // The packets that touch protocol state (the rest are free functions over
  // the engine, in trace_protocol.cc).
  Reply qtinit(const Packet&);
  Reply qtdp(const Packet& p);
  Reply upload_tracepoint(bool first);
  Reply upload_tsv(bool first);

  TraceEngine& engine_;
  std::function<void(const std::string&)> console_;

  // qTfP/qTsP: the tracepoint being uploaded and the next piece of it.
  struct TracepointCursor {
    std::vector<Tracepoint> snapshot;
    size_t tp = 0;
    bool header_sent = false;
    size_t action = 0, step = 0, source = 0;
  } tp_cursor_;
  // qTfV/qTsV: the next variable to upload.
  struct TsvCursor {
    std::vector<TsvDefinition> snapshot;
    size_t next = 0;
  } tsv_cursor_;
};

} // namespace gdbtrace
