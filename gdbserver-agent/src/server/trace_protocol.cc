#include "server/trace_protocol.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_set>
#include <utility>
#include <vector>

#include "abi/amd64_regs.h"
#include "common/hex.h"
#include "common/unique_fd.h"
#include "server/tdesc.h"
#include "server/trace_report_format.h"
#include "server/trace_requests.h"
#include "trace/frame.h"

namespace gdbtrace {

namespace {

// qTBuffer answers at most this many bytes (hex doubles them).
constexpr size_t kMaxBufferChunk = 8000;
// qGdbtrace.frames answers up to 1 MiB per reply: gdb grows its packet buffer
// for replies, and fewer round trips is what makes bulk export fast.
constexpr size_t kMaxFramesChunk = 1 << 20;

std::string error_reply(const Error& e) {
  return "E." + e.message;
}

Reply ok_or_error(const Result<void>& r) {
  return r ? "OK" : error_reply(r.error());
}

// The packets that need nothing but the engine: parse, one operation, reply.

Reply qtdp_actions(TraceEngine& engine, std::string_view args) {
  auto actions = parse_qtdp_actions(args, engine.verify_env());
  if (!actions)
    return error_reply(actions.error());
  return ok_or_error(engine.add_actions(std::move(*actions)));
}

Reply qtdpsrc(TraceEngine& engine, std::string_view args) {
  auto src = parse_qtdpsrc(args);
  if (!src)
    return error_reply(src.error());
  return ok_or_error(engine.add_source(std::move(*src)));
}

Reply qtdv(TraceEngine& engine, std::string_view args) {
  auto tsv = parse_qtdv(args);
  if (!tsv)
    return error_reply(tsv.error());
  return ok_or_error(engine.define_tsv(std::move(*tsv)));
}

Reply qtro(TraceEngine& engine, std::string_view args) {
  auto regions = parse_qtro(args);
  if (!regions)
    return error_reply(regions.error());
  engine.set_readonly_regions(std::move(*regions));
  return "OK";
}

Reply qtenable(TraceEngine& engine, std::string_view args, bool enable) {
  auto ref = parse_tracepoint_ref(args, "QTEnable/QTDisable");
  if (!ref)
    return error_reply(ref.error());
  return ok_or_error(engine.set_tracepoint_enabled(ref->number, ref->address, enable));
}

Reply qtdisconnected(TraceEngine& engine, std::string_view args) {
  auto on = parse_hex_flag(args, "QTDisconnected");
  if (!on)
    return error_reply(on.error());
  engine.set_disconnected_tracing(*on);
  return "OK";
}

Reply qtframe(TraceEngine& engine, std::string_view args) {
  auto query = parse_qtframe(args);
  if (!query)
    return error_reply(query.error());
  auto hit = engine.select_frame(*query);
  if (query->kind == FrameQuery::None)
    return "OK";
  if (!hit)
    return "F-1";
  return "F" + hex::u64(hit->frame) + "T" + hex::u64(hit->tracepoint);
}

Reply qtbuffer_circular(TraceEngine& engine, std::string_view args) {
  auto on = parse_hex_flag(args, "QTBuffer:circular");
  if (!on)
    return error_reply(on.error());
  engine.set_circular(*on);
  return "OK";
}

Reply qtbuffer_size(TraceEngine& engine, std::string_view args) {
  auto size = parse_qtbuffer_size(args);
  if (!size)
    return error_reply(size.error());
  return ok_or_error(engine.set_buffer_size(*size));
}

Reply qtnotes(TraceEngine& engine, std::string_view args) {
  auto notes = parse_qtnotes(args);
  if (!notes)
    return error_reply(notes.error());
  engine.set_notes(*notes);
  return "OK";
}

Reply qtsave(TraceEngine& engine, std::string_view args) {
  auto path = parse_qtsave(args);
  if (!path)
    return error_reply(path.error());
  return ok_or_error(engine.save(*path));
}

Reply qtstatus(TraceEngine& engine, std::string_view) {
  return format_qtstatus(engine.report().status);
}

Reply qtp(TraceEngine& engine, std::string_view args) {
  auto ref = parse_tracepoint_ref(args, "qTP");
  if (!ref)
    return error_reply(ref.error());
  auto counts = engine.tracepoint_counts(ref->number, ref->address);
  if (!counts)
    return error_reply(counts.error());
  // gdb parses hex; gdbserver 13 prints decimal here, which gdb misreads.
  return "V" + hex::u64(counts->hits) + ":" + hex::u64(counts->bytes);
}

Reply qtv(TraceEngine& engine, std::string_view args) {
  auto number = parse_qtv(args);
  if (!number)
    return error_reply(number.error());
  auto value = engine.tsv_value(*number);
  return value ? "V" + hex::u64(uint64_t(*value)) : "U";
}

Reply qtbuffer(TraceEngine& engine, std::string_view args) {
  auto range = parse_byte_range(args, "qTBuffer");
  if (!range)
    return error_reply(range.error());
  uint64_t size = engine.frame_stream_size();
  if (range->offset == size)
    return "l";
  if (range->offset > size)
    return "E.qTBuffer offset beyond the trace data";
  std::string out;
  engine.read_frame_stream(range->offset, std::min<uint64_t>(range->length, kMaxBufferChunk),
                           [&](std::span<const uint8_t> piece) {
                             out += hex::encode(piece.data(), piece.size());
                             return true;
                           });
  return out;
}

Reply gdbtrace_status(TraceEngine& engine, std::string_view) {
  return hex::encode(format_report_json(engine.report()));
}

// 'm'|'l' + raw bytes of the frame stream from OFF ('l': the last chunk).
Reply gdbtrace_frames(TraceEngine& engine, std::string_view args) {
  auto range = parse_byte_range(args, "qGdbtrace.frames: want qGdbtrace.frames:OFF,LEN");
  if (!range)
    return error_reply(range.error());
  uint64_t size = engine.frame_stream_size();
  if (range->offset > size)
    return "E.qGdbtrace.frames offset beyond the trace data";
  size_t n = std::min<uint64_t>({range->length, size - range->offset, kMaxFramesChunk});
  std::string out(range->offset + n == size ? "l" : "m");
  out.reserve(1 + n);
  engine.read_frame_stream(range->offset, n, [&](std::span<const uint8_t> piece) {
    out.append(reinterpret_cast<const char*>(piece.data()), piece.size());
    return true;
  });
  return out;
}

// The file a qGdbtrace.*.file packet writes: PATH, absolute, which must exist
// and be an empty regular file (opened without create and without following a
// link), so these packets cannot make or replace a file. An error says why,
// after PACKET's name.
static Result<UniqueFd> open_plugin_file(const std::string& path, const char* packet) {
  int fd = ::open(path.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return make_error(errno, std::string(packet) + ": " + std::strerror(errno));
  UniqueFd file(fd);
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size != 0)
    return make_error(EINVAL, std::string(packet) + ": not an empty regular file");
  return file;
}

static bool absolute_path(std::string_view hex_path, std::string& path) {
  return hex::decode_string(hex_path, path) && !path.empty() && path[0] == '/' &&
         path.find('\0') == std::string::npos;
}

// qGdbtrace.frames.file:OFF;HEXPATH -> F<bytes written> | E.<why>
// The frame stream from OFF written into PATH, an empty file the plugin made
// on the same host (it reads and deletes it): a local bulk read costs one
// write and one read instead of 1 MiB packets through gdb, which move about
// 20 MB/s. A stub on another host has no such file and refuses; the plugin
// then reads with qGdbtrace.frames. Only an existing, empty regular file is
// written (no create, no symlink), so the packet cannot replace a file's
// contents (vFile:open can already create files; this stays narrower).
Reply gdbtrace_frames_file(TraceEngine& engine, std::string_view args) {
  size_t semi = args.find(';');
  std::optional<uint64_t> off =
      semi == std::string_view::npos ? std::nullopt : hex::parse_u64(args.substr(0, semi));
  std::string path;
  if (!off || !absolute_path(args.substr(semi + 1), path))
    return "E.qGdbtrace.frames.file: want qGdbtrace.frames.file:OFF;HEXPATH";
  uint64_t offset = *off;
  uint64_t size = engine.frame_stream_size();
  if (offset > size)
    return "E.qGdbtrace.frames.file offset beyond the trace data";
  auto file = open_plugin_file(path, "qGdbtrace.frames.file");
  if (!file)
    return "E." + file.error().message;
  int fd = file->get();
  // The stream is expanded a frame at a time: gather pieces into writes of
  // about a megabyte rather than one write per frame.
  constexpr size_t kWriteBatch = 1 << 20;
  std::vector<uint8_t> batch;
  int err = 0;
  auto write_all = [&](std::span<const uint8_t> bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::write(fd, bytes.data(), bytes.size());
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0) {
        err = n < 0 ? errno : EIO;
        return false;
      }
      bytes = bytes.subspan(size_t(n));
    }
    return true;
  };
  engine.read_frame_stream(offset, size - offset, [&](std::span<const uint8_t> piece) {
    if (piece.size() >= kWriteBatch) // a long run of frames stored as they are
      return (batch.empty() || write_all(std::exchange(batch, {}))) && write_all(piece);
    batch.insert(batch.end(), piece.begin(), piece.end());
    return batch.size() < kWriteBatch || write_all(std::exchange(batch, {}));
  });
  if (!err)
    write_all(batch);
  if (err)
    return "E.qGdbtrace.frames.file: " + std::string(std::strerror(err));
  return "F" + hex::u64(size - offset);
}

// qGdbtrace.save.file:HEXPATH -> OK | E.<why>
// What `tsave -r` writes (the stub's tfile writer: registers no frame holds
// stay <unavailable>), into PATH, an empty file the plugin made on this host
// for `gdbtrace export tfile`. As qGdbtrace.frames.file: only an existing,
// empty regular file is written (no create, no symlink); a stub on another
// host has no such file and refuses, and the plugin writes the file itself.
Reply gdbtrace_save_file(TraceEngine& engine, std::string_view args) {
  std::string path;
  if (!absolute_path(args, path))
    return "E.qGdbtrace.save.file: want qGdbtrace.save.file:HEXPATH";
  auto file = open_plugin_file(path, "qGdbtrace.save.file");
  if (!file)
    return "E." + file.error().message;
  return ok_or_error(engine.save("/proc/self/fd/" + std::to_string(file->get())));
}

} // namespace

std::vector<PacketRow> TraceProtocol::rows() {
  auto bind = [this](Reply (TraceProtocol::*f)(const Packet&)) {
    return [this, f](const Packet& p) { return (this->*f)(p); };
  };
  auto op = [this](Reply (*f)(TraceEngine&, std::string_view)) {
    return [this, f](const Packet& p) { return f(engine_, p.args); };
  };
  using T = TraceProtocol;
  return {
      PacketRow::exact("QTinit", bind(&T::qtinit)),
      // InstallInTrace: a tracepoint defined during a run is installed at once.
      // tracenz: the agent-expression VM has the tracenz opcode.
      PacketRow::prefix("QTDP:", bind(&T::qtdp))
          .advertise("ConditionalTracepoints+;InstallInTrace+;FastTracepoints+;tracenz+"),
      PacketRow::prefix("QTDP:-", op(&qtdp_actions)),
      PacketRow::prefix("QTDPsrc:", op(&qtdpsrc)).advertise("TracepointSource+"),
      PacketRow::prefix("QTDV:", op(&qtdv)),
      PacketRow::prefix("QTro", op(&qtro)),
      PacketRow::prefix("QTEnable:",
                        [this](const Packet& p) { return qtenable(engine_, p.args, true); })
          .advertise("EnableDisableTracepoints+"),
      PacketRow::prefix("QTDisable:",
                        [this](const Packet& p) { return qtenable(engine_, p.args, false); }),
      PacketRow::exact("QTStart", bind(&T::qtstart)),
      PacketRow::exact("QTStop", bind(&T::qtstop)).prints_console(),
      PacketRow::prefix("QTDisconnected:", op(&qtdisconnected)).advertise("DisconnectedTracing+"),
      PacketRow::prefix("QTFrame:", bind(&T::qtframe)).prints_console(),
      PacketRow::prefix("QTBuffer:circular:", op(&qtbuffer_circular)),
      PacketRow::prefix("QTBuffer:size:", op(&qtbuffer_size)).advertise("QTBuffer:size+"),
      PacketRow::prefix("QTNotes:", op(&qtnotes)),
      PacketRow::prefix("QTSave:", bind(&T::qtsave)).prints_console(),
      PacketRow::exact("qTStatus", op(&qtstatus)),
      PacketRow::prefix("qTP:", op(&qtp)),
      PacketRow::exact("qTfP", [this](const Packet&) { return upload_tracepoint(true); }),
      PacketRow::exact("qTsP", [this](const Packet&) { return upload_tracepoint(false); }),
      PacketRow::exact("qTfV", [this](const Packet&) { return upload_tsv(true); }),
      PacketRow::exact("qTsV", [this](const Packet&) { return upload_tsv(false); }),
      PacketRow::prefix("qTV:", op(&qtv)),
      PacketRow::prefix("qTBuffer:", bind(&T::qtbuffer)).prints_console(),
      // Static tracepoints (markers) are not ours: say so rather than reply empty.
      PacketRow::exact(
          "qTfSTM", [](const Packet&) { return Reply("E.static tracepoints are not supported"); }),
      PacketRow::exact(
          "qTsSTM", [](const Packet&) { return Reply("E.static tracepoints are not supported"); }),
      PacketRow::prefix(
          "qTSTMat:",
          [](const Packet&) { return Reply("E.static tracepoints are not supported"); }),
      // Every collector of ours traps with a 1-byte int3 (or a uprobe), so any
      // instruction can carry a fast tracepoint.
      PacketRow::exact("qTMinFTPILen", [](const Packet&) { return Reply("1"); }),
      PacketRow::exact("qGdbtrace.status", op(&gdbtrace_status)),
      PacketRow::prefix("qGdbtrace.frames:", op(&gdbtrace_frames)).binary(),
      PacketRow::prefix("qGdbtrace.frames.file:", op(&gdbtrace_frames_file)),
      PacketRow::prefix("qGdbtrace.save.file:", op(&gdbtrace_save_file)),
      PacketRow::prefix("qGdbtrace.stacks:", bind(&T::gdbtrace_stacks)).binary(),
  };
}

Reply TraceProtocol::qtstart(const Packet&) {
  auto started = engine_.start();
  if (!started)
    return error_reply(started.error());
  run_had_location_ = !engine_.report().tracepoints.empty();
  empty_run_warned_ = false;
  frames_saved_ = 0;
  // The module list is read now, while the process lives: its frames may be
  // unwound after it exited. Without one, stacks answer with the reason.
  if (engine_.stack_bytes())
    if (auto r = unwinder_.refresh_modules(engine_.traced_pid()); !r && console_)
      console_("gdbtrace: stacks: " + r.error().message + "\n");
  return "OK";
}

void TraceProtocol::warn_if_empty_run() {
  if (!engine_.running() || run_had_location_ || empty_run_warned_ || !console_)
    return;
  empty_run_warned_ = true;
  console_("gdbtrace: this trace run has no tracepoint location, so nothing is collected: gdb "
           "sent none at tstart (a pending tracepoint gets one only when a library defining "
           "it loads; `info tracepoints` shows which are <PENDING>)\n");
}

uint64_t TraceProtocol::frame_count() {
  return engine_.report().status.frames;
}

// A name no other file can have, in $TMPDIR (else /tmp), created here so the
// save cannot follow a link planted at a predictable name.
static std::optional<std::string> new_trace_file(int pid) {
  const char* dir = std::getenv("TMPDIR");
  std::string path =
      std::string(dir && *dir ? dir : "/tmp") + "/gdbtrace-" + std::to_string(pid) + "-XXXXXX.tf";
  int fd = ::mkstemps(path.data(), 3);
  if (fd < 0)
    return std::nullopt;
  ::close(fd);
  return path;
}

void TraceProtocol::on_process_exit(int pid, const std::string& how, bool gdb_stays) {
  if (pid != engine_.traced_pid())
    return;
  warn_if_empty_run();
  frame_note_given_ = false;
  engine_.on_process_exit(pid, how); // the run ends here: the frame count is final
  uint64_t frames = frame_count();
  if (frames == 0 || frames == frames_saved_)
    return;
  std::string what = "gdbtrace: process " + std::to_string(pid) + " ended; its trace (" +
                     std::to_string(frames) + " frames) ";
  if (gdb_stays) {
    // gdb shows a trace frame in the context of a live thread: with the
    // program gone, tfind answers "No registers." (stock gdbserver too).
    console_(what + "stays in gdbtrace-server until the next tstart. tstatus and tsave work now; "
                    "tfind and tdump need a live thread, so save it (`tsave FILE`) and read it "
                    "with `target tfile FILE`\n");
    return;
  }
  std::optional<std::string> path = new_trace_file(pid);
  Result<void> saved = path ? engine_.save(*path) : make_error(errno, std::strerror(errno));
  std::string text =
      saved ? what + "was saved to " + *path +
                  " (gdb closes a `target remote` connection when the program ends): read it "
                  "with `target tfile " +
                  *path + "`\n"
            : what + "could not be saved (" + saved.error().message +
                  ") and is lost with this connection\n";
  if (saved)
    frames_saved_ = frames;
  // gdb may not read the console now (a kill): the server's terminal hears it too.
  std::fputs(text.c_str(), stderr);
  console_(text);
}

// What `tsave -r` cannot keep readable (server/tdesc.h): said on gdb's
// console, which reads it before the reply.
Reply TraceProtocol::qtsave(const Packet& p) {
  Reply reply = ::gdbtrace::qtsave(engine_, p.args);
  if (!reply || *reply != "OK")
    return reply;
  frames_saved_ = frame_count();
  std::vector<bool> present = engine_.registers_in_every_frame();
  auto lost = registers_tfile_cannot_show(present.size() > GT_NUM_REGS_NOAVX, present);
  if (!lost.empty() && console_) {
    std::string names;
    for (const auto& name : lost)
      names += (names.empty() ? "$" : ", $") + name;
    console_("gdbtrace: the saved file holds " + names +
             " of every frame, but gdb reads them back as <unavailable>: its tfile reader stops "
             "at the first register a frame lacks (these frames have no x87/SSE or segment "
             "selectors); live, and through the plugin, they are available\n");
  }
  return reply;
}

// Plain `tsave` is written by gdb itself from qTBuffer: its 'R' blocks give
// every register a value, so registers a frame did not collect read back as 0
// from the file. Say so when that happens (gdb reads the console here), and
// which save keeps them unavailable.
Reply TraceProtocol::qtbuffer(const Packet& p) {
  Reply reply = ::gdbtrace::qtbuffer(engine_, p.args);
  if (!reply || reply->starts_with("E"))
    return reply;
  std::vector<bool> present;
  if (p.args.starts_with("0,") && console_)
    present = engine_.registers_in_every_frame();
  if (std::find(present.begin(), present.end(), false) != present.end())
    console_("gdbtrace: in a file written by plain `tsave`, registers a frame did not collect "
             "read as 0 (gdb writes every register of the block); `tsave -r FILE` (or the "
             "plugin's `gdbtrace export tfile`) writes them as <unavailable>\n");
  if (*reply == "l")
    frames_saved_ = frame_count();
  return reply;
}

Reply TraceProtocol::qtframe(const Packet& p) {
  Reply reply = ::gdbtrace::qtframe(engine_, p.args);
  bool found = reply && reply->starts_with("F") && *reply != "F-1";
  if (found && console_ && live_process_ && !live_process_() && !frame_note_given_) {
    frame_note_given_ = true;
    console_("gdbtrace: no program is running, so gdb has no thread to show this trace frame in "
             "(it says \"No registers.\"): save the trace (`tsave FILE`) and read it with "
             "`target tfile FILE`\n");
  }
  return reply;
}

Reply TraceProtocol::qtstop(const Packet&) {
  warn_if_empty_run();
  // The last look at the module list while the run's process surely lives.
  if (engine_.running() && engine_.stack_bytes())
    (void)unwinder_.refresh_modules(engine_.traced_pid());
  engine_.stop();
  return "OK";
}

// 'm'|'l' + one line per trace frame from FIRST, at most COUNT frames and
// about 1 MiB ('l': the range reached the last frame), numbers in hex:
//   F<frame> T<tracepoint> <status>[:<error>] then, innermost first, a TAB and
//   the pc of each frame of the stack;
//   S<pc> <function>;<module>;<file:line>;<module id>;<offset>   before the
//   first F line using a pc (once per reply); offset: the looked-up address in
//   the module's ELF addresses (StackEntry::offset), empty when unknown;
//   M<module id> <build-id>;<symbols>;<path>   before the first S line naming
//   the module (once per reply); symbols: full, dynamic, none or unreadable
//   (ModuleInfo).
// status: ok (outermost frame reached), truncated (the snapshot ended),
// nostack (no registers in the frame), error.
Reply TraceProtocol::gdbtrace_stacks(const Packet& p) {
  auto range = parse_byte_range(p.args, "qGdbtrace.stacks: want qGdbtrace.stacks:FIRST,COUNT");
  if (!range)
    return error_reply(range.error());
  uint32_t regblock = engine_.report().register_block_size;
  uint64_t count = engine_.frame_count();
  // The process may have loaded libraries since QTStart. Only during the run:
  // afterwards the list read last (at a stop, at QTStop) is kept, and a pid
  // reused by another process can never lend it its modules.
  if (engine_.running() && engine_.stack_bytes())
    (void)unwinder_.refresh_modules(engine_.traced_pid());
  if (range->offset >= count)
    return range->offset == count ? Reply("l")
                                  : Reply("E.qGdbtrace.stacks frame beyond the trace data");
  std::string out = "m";
  std::unordered_set<uint64_t> named;
  std::unordered_set<int> described;
  std::vector<uint8_t> scratch;
  uint64_t f = range->offset;
  for (uint64_t n = 0; n < range->length && f < count && out.size() < kMaxFramesChunk; ++n, ++f) {
    std::span<const uint8_t> frame = engine_.stream_frame(f, scratch);
    UnwoundStack stack = unwinder_.unwind(frame, regblock);
    // Each pc's names once per reply ('S' line before the first frame using it):
    // stacks repeat, and the reply crosses gdb's packet path (~20 MB/s).
    // Modules by build-id too, so that frames a module has no symbols for can
    // be named later (debuginfod, addr2line on the unstripped file).
    for (const auto& e : stack.entries) {
      if (!named.insert(e.pc).second)
        continue;
      if (e.module_id >= 0 && described.insert(e.module_id).second) {
        const ModuleInfo& m = unwinder_.module(e.module_id);
        out +=
            "M" + hex::u64(e.module_id) + " " + m.build_id + ";" + m.symbols + ";" + m.path + "\n";
      }
      out += "S" + hex::u64(e.pc) + " " + e.function + ";" + e.module + ";" + e.source + ";" +
             (e.module_id >= 0 ? hex::u64(e.module_id) : "") + ";" +
             (e.has_offset ? hex::u64(e.offset) : "") + "\n";
    }
    out += "F" + hex::u64(f) + " T" + hex::u64(FrameView(frame, regblock).tp_number()) + " " +
           stack_status_word(stack.status);
    if (!stack.error.empty())
      out += ":" + stack.error;
    for (const auto& e : stack.entries)
      out += "\t" + hex::u64(e.pc);
    out += "\n";
  }
  if (f >= count)
    out[0] = 'l';
  return out;
}

void TraceProtocol::on_process_stopped(int pid) {
  engine_.on_process_stopped(pid);
  if (engine_.running() && engine_.stack_bytes() && pid == engine_.traced_pid())
    (void)unwinder_.refresh_modules(pid);
}

void TraceProtocol::reset_cursors() {
  tp_cursor_ = {};
  tsv_cursor_ = {};
}

Reply TraceProtocol::qtinit(const Packet&) {
  engine_.reset();
  reset_cursors();
  return "OK";
}

Reply TraceProtocol::qtdp(const Packet& p) {
  auto def = parse_qtdp(p.args, engine_.verify_env());
  if (!def) {
    if (console_)
      console_("gdbtrace: " + def.error().message + "\n");
    return error_reply(def.error());
  }
  auto defined = engine_.define_tracepoint(std::move(*def));
  if (defined && engine_.running())
    run_had_location_ = true; // installed during the run (a library loaded)
  return ok_or_error(defined);
}

// One piece per packet: the header ("T"), then each action ("A"), step action
// ("S") and source string ("Z"), then the next tracepoint; "l" at the end.
Reply TraceProtocol::upload_tracepoint(bool first) {
  TracepointCursor& c = tp_cursor_;
  if (first)
    c = TracepointCursor{engine_.tracepoints()};
  while (c.tp < c.snapshot.size()) {
    const Tracepoint& tp = c.snapshot[c.tp];
    std::string id = hex::u64(tp.number) + ":" + hex::u64(tp.address);
    if (!c.header_sent) {
      c.header_sent = true;
      c.action = c.step = c.source = 0;
      std::string r = "T" + id + ":" + (tp.enabled ? "E" : "D") + ":" + hex::u64(tp.step_count) +
                      ":" + hex::u64(tp.pass_count);
      if (tp.fast)
        r += ":F" + hex::u64(tp.fast_min_len);
      if (tp.has_condition)
        r += ":X" + hex::u64(tp.condition.code.size()) + "," + hex::encode(tp.condition.code);
      return r;
    }
    if (c.action < tp.action_texts.size())
      return "A" + id + ":" + tp.action_texts[c.action++];
    if (c.step < tp.step_action_texts.size())
      return "S" + id + ":" + tp.step_action_texts[c.step++];
    if (c.source < tp.source.size()) {
      const std::string& text = tp.source[c.source];
      const std::string& type = tp.source_types[c.source++];
      return "Z" + id + ":" + type + ":0:" + hex::u64(text.size()) + ":" + hex::encode(text);
    }
    ++c.tp;
    c.header_sent = false;
  }
  return "l";
}

Reply TraceProtocol::upload_tsv(bool first) {
  TsvCursor& c = tsv_cursor_;
  if (first) {
    // Newest first, as gdbserver walks its list (it prepends each new variable):
    // gdb prepends what it uploads, so it then creates them oldest first
    // (=tsv-created order of gdb.trace/mi-tsv-changed.exp).
    c = TsvCursor{engine_.tsvs()};
    std::reverse(c.snapshot.begin(), c.snapshot.end());
  }
  if (c.next >= c.snapshot.size())
    return "l";
  const TsvDefinition& tsv = c.snapshot[c.next++];
  return hex::u64(tsv.number) + ":" + hex::u64(uint64_t(tsv.initial)) + ":" +
         (tsv.builtin ? "1" : "0") + ":" + hex::encode(tsv.name);
}

} // namespace gdbtrace
