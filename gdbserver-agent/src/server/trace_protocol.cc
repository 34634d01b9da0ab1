#include "server/trace_protocol.h"

#include <algorithm>

#include "common/hex.h"
#include "server/trace_report_format.h"
#include "server/trace_requests.h"

namespace gdbtrace {

namespace {

using Match = PacketRow::Match;

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

} // namespace

std::vector<PacketRow> TraceProtocol::rows() {
  auto bind = [this](Reply (TraceProtocol::*f)(const Packet&)) {
    return [this, f](const Packet& p) { return (this->*f)(p); };
  };
  using T = TraceProtocol;
  return {
      {"QTinit", Match::Exact, false, "", {}, bind(&T::qtinit)},
      // InstallInTrace: a tracepoint defined during a run is installed at once.
      // tracenz: the agent-expression VM has the tracenz opcode.
      {"QTDP:",
       Match::Prefix,
       false,
       "ConditionalTracepoints+;InstallInTrace+;FastTracepoints+;tracenz+",
       {},
       bind(&T::qtdp)},
      {"QTDP:-", Match::Prefix, false, "", {}, bind(&T::qtdp_actions)},
      {"QTDPsrc:", Match::Prefix, false, "TracepointSource+", {}, bind(&T::qtdpsrc)},
      {"QTDV:", Match::Prefix, false, "", {}, bind(&T::qtdv)},
      {"QTro", Match::Prefix, false, "", {}, bind(&T::qtro)},
      {"QTEnable:",
       Match::Prefix,
       false,
       "EnableDisableTracepoints+",
       {},
       [this](const Packet& p) { return qtenable(p, true); }},
      {"QTDisable:",
       Match::Prefix,
       false,
       "",
       {},
       [this](const Packet& p) { return qtenable(p, false); }},
      {"QTStart", Match::Exact, false, "", {}, bind(&T::qtstart)},
      {"QTStop", Match::Exact, false, "", {}, bind(&T::qtstop)},
      {"QTDisconnected:",
       Match::Prefix,
       false,
       "DisconnectedTracing+",
       {},
       bind(&T::qtdisconnected)},
      {"QTFrame:", Match::Prefix, false, "", {}, bind(&T::qtframe)},
      {"QTBuffer:circular:", Match::Prefix, false, "", {}, bind(&T::qtbuffer_circular)},
      {"QTBuffer:size:", Match::Prefix, false, "QTBuffer:size+", {}, bind(&T::qtbuffer_size)},
      {"QTNotes:", Match::Prefix, false, "", {}, bind(&T::qtnotes)},
      {"QTSave:", Match::Prefix, false, "", {}, bind(&T::qtsave)},
      {"qTStatus", Match::Exact, false, "", {}, bind(&T::qtstatus)},
      {"qTP:", Match::Prefix, false, "", {}, bind(&T::qtp)},
      {"qTfP",
       Match::Exact,
       false,
       "",
       {},
       [this](const Packet&) { return upload_tracepoint(true); }},
      {"qTsP",
       Match::Exact,
       false,
       "",
       {},
       [this](const Packet&) { return upload_tracepoint(false); }},
      {"qTfV", Match::Exact, false, "", {}, [this](const Packet&) { return upload_tsv(true); }},
      {"qTsV", Match::Exact, false, "", {}, [this](const Packet&) { return upload_tsv(false); }},
      {"qTV:", Match::Prefix, false, "", {}, bind(&T::qtv)},
      {"qTBuffer:", Match::Prefix, false, "", {}, bind(&T::qtbuffer)},
      // Static tracepoints (markers) are not ours: say so rather than reply empty.
      {"qTfSTM",
       Match::Exact,
       false,
       "",
       {},
       [](const Packet&) { return Reply("E.static tracepoints are not supported"); }},
      {"qTsSTM",
       Match::Exact,
       false,
       "",
       {},
       [](const Packet&) { return Reply("E.static tracepoints are not supported"); }},
      {"qTSTMat:",
       Match::Prefix,
       false,
       "",
       {},
       [](const Packet&) { return Reply("E.static tracepoints are not supported"); }},
      // Every collector of ours traps with a 1-byte int3 (or a uprobe), so any
      // instruction can carry a fast tracepoint.
      {"qTMinFTPILen", Match::Exact, false, "", {}, [](const Packet&) { return Reply("1"); }},
      {"qGdbtrace.status", Match::Exact, false, "", {}, bind(&T::gdbtrace_status)},
      {"qGdbtrace.frames:", Match::Prefix, true, "", {}, bind(&T::gdbtrace_frames)},
  };
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
  return ok_or_error(engine_.define_tracepoint(std::move(*def)));
}

Reply TraceProtocol::qtdp_actions(const Packet& p) {
  auto actions = parse_qtdp_actions(p.args, engine_.verify_env());
  if (!actions)
    return error_reply(actions.error());
  return ok_or_error(engine_.add_actions(std::move(*actions)));
}

Reply TraceProtocol::qtdpsrc(const Packet& p) {
  auto src = parse_qtdpsrc(p.args);
  if (!src)
    return error_reply(src.error());
  return ok_or_error(engine_.add_source(std::move(*src)));
}

Reply TraceProtocol::qtdv(const Packet& p) {
  auto tsv = parse_qtdv(p.args);
  if (!tsv)
    return error_reply(tsv.error());
  return ok_or_error(engine_.define_tsv(std::move(*tsv)));
}

Reply TraceProtocol::qtro(const Packet& p) {
  auto regions = parse_qtro(p.args);
  if (!regions)
    return error_reply(regions.error());
  engine_.set_readonly_regions(std::move(*regions));
  return "OK";
}

Reply TraceProtocol::qtenable(const Packet& p, bool enable) {
  auto ref = parse_tracepoint_ref(p.args, "QTEnable/QTDisable");
  if (!ref)
    return error_reply(ref.error());
  return ok_or_error(engine_.set_tracepoint_enabled(ref->number, ref->address, enable));
}

Reply TraceProtocol::qtstart(const Packet&) {
  return ok_or_error(engine_.start());
}

Reply TraceProtocol::qtstop(const Packet&) {
  engine_.stop();
  return "OK";
}

Reply TraceProtocol::qtdisconnected(const Packet& p) {
  auto on = parse_hex_flag(p.args, "QTDisconnected");
  if (!on)
    return error_reply(on.error());
  engine_.set_disconnected_tracing(*on);
  return "OK";
}

Reply TraceProtocol::qtframe(const Packet& p) {
  auto query = parse_qtframe(p.args);
  if (!query)
    return error_reply(query.error());
  auto hit = engine_.select_frame(*query);
  if (query->kind == FrameQuery::None)
    return "OK";
  if (!hit)
    return "F-1";
  return "F" + hex::u64(hit->frame) + "T" + hex::u64(hit->tracepoint);
}

Reply TraceProtocol::qtbuffer_circular(const Packet& p) {
  auto on = parse_hex_flag(p.args, "QTBuffer:circular");
  if (!on)
    return error_reply(on.error());
  engine_.set_circular(*on);
  return "OK";
}

Reply TraceProtocol::qtbuffer_size(const Packet& p) {
  auto size = parse_qtbuffer_size(p.args);
  if (!size)
    return error_reply(size.error());
  return ok_or_error(engine_.set_buffer_size(*size));
}

Reply TraceProtocol::qtnotes(const Packet& p) {
  auto notes = parse_qtnotes(p.args);
  if (!notes)
    return error_reply(notes.error());
  engine_.set_notes(*notes);
  return "OK";
}

Reply TraceProtocol::qtsave(const Packet& p) {
  auto path = parse_qtsave(p.args);
  if (!path)
    return error_reply(path.error());
  return ok_or_error(engine_.save(*path));
}

Reply TraceProtocol::qtstatus(const Packet&) {
  return format_qtstatus(engine_.report().status);
}

Reply TraceProtocol::qtp(const Packet& p) {
  auto ref = parse_tracepoint_ref(p.args, "qTP");
  if (!ref)
    return error_reply(ref.error());
  auto counts = engine_.tracepoint_counts(ref->number, ref->address);
  if (!counts)
    return error_reply(counts.error());
  // gdb parses hex; gdbserver 13 prints decimal here, which gdb misreads.
  return "V" + hex::u64(counts->hits) + ":" + hex::u64(counts->bytes);
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
  if (first)
    c = TsvCursor{engine_.tsvs()};
  if (c.next >= c.snapshot.size())
    return "l";
  const TsvDefinition& tsv = c.snapshot[c.next++];
  return hex::u64(tsv.number) + ":" + hex::u64(uint64_t(tsv.initial)) + ":" +
         (tsv.builtin ? "1" : "0") + ":" + hex::encode(tsv.name);
}

Reply TraceProtocol::qtv(const Packet& p) {
  auto number = parse_qtv(p.args);
  if (!number)
    return error_reply(number.error());
  auto value = engine_.tsv_value(*number);
  return value ? "V" + hex::u64(uint64_t(*value)) : "U";
}

Reply TraceProtocol::qtbuffer(const Packet& p) {
  auto range = parse_byte_range(p.args, "qTBuffer");
  if (!range)
    return error_reply(range.error());
  auto bytes = engine_.frame_bytes();
  if (range->offset == bytes.size())
    return "l";
  if (range->offset > bytes.size())
    return "E.qTBuffer offset beyond the trace data";
  size_t n = std::min<uint64_t>({range->length, bytes.size() - range->offset, kMaxBufferChunk});
  return hex::encode(bytes.data() + range->offset, n);
}

Reply TraceProtocol::gdbtrace_status(const Packet&) {
  return hex::encode(format_report_json(engine_.report()));
}

// 'm'|'l' + raw bytes of the frame stream from OFF ('l': the last chunk).
Reply TraceProtocol::gdbtrace_frames(const Packet& p) {
  auto range = parse_byte_range(p.args, "qGdbtrace.frames: want qGdbtrace.frames:OFF,LEN");
  if (!range)
    return error_reply(range.error());
  auto bytes = engine_.frame_bytes();
  if (range->offset > bytes.size())
    return "E.qGdbtrace.frames offset beyond the trace data";
  size_t n = std::min<uint64_t>({range->length, bytes.size() - range->offset, kMaxFramesChunk});
  std::string out(range->offset + n == bytes.size() ? "l" : "m");
  out.append(reinterpret_cast<const char*>(bytes.data() + range->offset), n);
  return out;
}

} // namespace gdbtrace
