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
  // PID exited or was killed (HOW, as TraceEngine::on_process_exit takes it);
  // the server forgets it next. The run ends (its
  // frame count is final) and, if the trace was never saved, gdb hears where
  // it is: with GDB_STAYS (extended-remote) it stays in the stub until the
  // next tstart; otherwise gdb closes the connection as soon as it sees the
  // exit (`target remote`), so the trace is saved to a file first.
  void on_process_exit(int pid, const std::string& how, bool gdb_stays);
  // Whether gdb has a live process (so a thread to show a trace frame in).
  void set_live_process(std::function<bool()> live) { live_process_ = std::move(live); }

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
  Reply qtsave(const Packet& p);
  Reply qtbuffer(const Packet& p);
  Reply qtframe(const Packet& p);
  uint64_t frame_count();

  // A run in which gdb never sent a tracepoint location (every tracepoint is
  // pending on a library that has not loaded, or on a name that exists
  // nowhere) collects nothing. gdb says nothing at tstart, and must not hear
  // anything there (its pending.exp expects tstart to be silent: the library
  // may load during the run), nor at qTStatus (gdb asks for it itself before
  // it sends the location of a library that just loaded), so tstop or the
  // traced process's exit says it, once per run.
  void warn_if_empty_run();

  TraceEngine& engine_;
  std::function<void(const std::string&)> console_;
  // warn_if_empty_run: a location arrived this run / the warning was given.
  bool run_had_location_ = false, empty_run_warned_ = false;
  // Frames in the buffer when gdb last saved the trace (QTSave, or plain
  // tsave reading qTBuffer to its end): more at the process's exit means
  // unsaved frames.
  uint64_t frames_saved_ = 0;
  bool frame_note_given_ = false; // qtframe's "no live thread" note, once per exit
  std::function<bool()> live_process_;

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
