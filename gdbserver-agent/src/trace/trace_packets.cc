// The tracepoint packets (QT*, qT*, qGdbtrace.*): parsing and reply formats,
// following gdbserver 13's tracepoint.cc packet for packet.
#include <algorithm>

#include "common/hex.h"
#include "trace/frame.h"
#include "trace/trace_engine_impl.h"

namespace gdbtrace {

namespace {

std::string error_reply(const std::string& text) {
  return "E." + text;
}

bool starts(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}

// qTBuffer answers at most this many bytes (hex doubles them).
constexpr size_t kMaxBufferChunk = 8000;
// qGdbtrace.frames answers up to 1 MiB per reply: gdb grows its packet buffer
// for replies, and fewer round trips is what makes bulk export fast.
constexpr size_t kMaxFramesChunk = 1 << 20;

} // namespace

std::optional<std::string> TraceEngine::Impl::dispatch(std::string_view p) {
  std::string_view rest = p;
  if (p == "QTinit")
    return cmd_qtinit();
  if (hex::take_prefix(rest, "QTDP:-"))
    return cmd_qtdp_actions(rest);
  if (hex::take_prefix(rest, "QTDP:"))
    return cmd_qtdp(rest);
  if (hex::take_prefix(rest, "QTDPsrc:"))
    return cmd_qtdpsrc(rest);
  if (hex::take_prefix(rest, "QTDV:"))
    return cmd_qtdv(rest);
  if (hex::take_prefix(rest, "QTro"))
    return cmd_qtro(rest);
  if (hex::take_prefix(rest, "QTEnable:"))
    return cmd_qtenable(rest, true);
  if (hex::take_prefix(rest, "QTDisable:"))
    return cmd_qtenable(rest, false);
  if (p == "QTStart")
    return cmd_qtstart();
  if (p == "QTStop") {
    stop_run(TraceStopReason::Requested);
    return "OK";
  }
  if (hex::take_prefix(rest, "QTDisconnected:")) {
    uint64_t v = 0;
    if (!hex::take_u64(rest, v))
      return error_reply("malformed QTDisconnected");
    disconnected_tracing = v != 0;
    return "OK";
  }
  if (hex::take_prefix(rest, "QTFrame:"))
    return cmd_qtframe(rest);
  if (hex::take_prefix(rest, "QTBuffer:circular:")) {
    uint64_t v = 0;
    if (!hex::take_u64(rest, v))
      return error_reply("malformed QTBuffer:circular");
    buffer.set_circular(v != 0);
    return "OK";
  }
  if (hex::take_prefix(rest, "QTBuffer:size:"))
    return cmd_qtbuffer_size(rest);
  if (hex::take_prefix(rest, "QTNotes:"))
    return cmd_qtnotes(rest);
  if (hex::take_prefix(rest, "QTSave:"))
    return cmd_qtsave(rest);
  if (p == "qTStatus")
    return cmd_qtstatus();
  if (hex::take_prefix(rest, "qTP:"))
    return cmd_qtp(rest);
  if (p == "qTfP")
    return cmd_upload_tp(true);
  if (p == "qTsP")
    return cmd_upload_tp(false);
  if (p == "qTfV")
    return cmd_upload_tsv(true);
  if (p == "qTsV")
    return cmd_upload_tsv(false);
  if (hex::take_prefix(rest, "qTV:"))
    return cmd_qtv(rest);
  if (hex::take_prefix(rest, "qTBuffer:"))
    return cmd_qtbuffer(rest);
  if (p == "qTfSTM" || p == "qTsSTM" || starts(p, "qTSTMat:"))
    return error_reply("static tracepoints are not supported");
  if (p == "qTMinFTPILen") {
    // Every collector of ours traps with a 1-byte int3 (or a uprobe), so any
    // instruction can carry a fast tracepoint.
    return "1";
  }
  if (p == "qGdbtrace.status")
    return hex::encode(status_json());
  if (hex::take_prefix(rest, "qGdbtrace.frames:"))
    return cmd_gdbtrace_frames(rest);
  return std::nullopt;
}

std::string TraceEngine::Impl::cmd_qtinit() {
  current_frame = -1;
  stop_run(TraceStopReason::Requested);
  for (auto& c : collectors)
    c->remove_all();
  tracepoints.clear();
  readonly_regions.clear();
  counters.clear();
  register_availability.clear();
  std::erase_if(tsvs, [](const auto& kv) { return !kv.second.builtin; });
  buffer.clear();
  return "OK";
}

std::string TraceEngine::Impl::cmd_qtdp(std::string_view body) {
  auto header = parse_qtdp_header(body, verify_env());
  if (!header) {
    console("gdbtrace: " + header.error().message + "\n");
    return error_reply(header.error().message);
  }
  Tracepoint& tp = header->tp;
  if (auto* existing = find(tp.number, tp.address)) {
    const Tracepoint& old = existing->tp;
    bool same = old.enabled == tp.enabled && old.step_count == tp.step_count &&
                old.pass_count == tp.pass_count && old.fast == tp.fast &&
                old.has_condition == tp.has_condition && old.condition.code == tp.condition.code;
    if (!same) {
      std::string msg = "tracepoint " + std::to_string(tp.number) + " at 0x" +
                        hex::u64(tp.address) +
                        " is already defined differently (QTinit first to redefine)";
      console("gdbtrace: " + msg + "\n");
      return error_reply(msg);
    }
    // Identical re-definition (gdb re-sends after shared libraries load): accept it
    // and check the action packets that follow against what we have.
    existing->redefining = header->more;
    existing->dedupe_sources = true;
    existing->redefine_stepping = false;
    existing->redefine_action = existing->redefine_step = existing->redefine_source = 0;
    return "OK";
  }
  auto entry = std::make_unique<TracepointEntry>();
  entry->tp = std::move(tp);
  entry->complete = !header->more;
  auto* e = entry.get();
  tracepoints.push_back(std::move(entry));
  if (running && e->complete) {
    if (auto r = install(*e); !r) {
      console("gdbtrace: " + r.error().message + "\n");
      tracepoints.pop_back();
      return error_reply(r.error().message);
    }
  }
  return "OK";
}

std::string TraceEngine::Impl::cmd_qtdp_actions(std::string_view body) {
  auto split = split_qtdp_actions(body);
  if (!split)
    return error_reply(split.error().message);
  auto* e = find(split->number, split->address);
  if (!e)
    return error_reply("tracepoint " + std::to_string(split->number) + " at 0x" +
                       hex::u64(split->address) + " is not defined");
  if (e->redefining) {
    // Parse into a scratch copy and compare with what the first definition had.
    Tracepoint scratch;
    scratch.number = e->tp.number;
    auto more = parse_actions(split->actions, e->redefine_stepping, scratch, verify_env());
    if (!more)
      return error_reply(more.error().message);
    bool same = true;
    for (auto& t : scratch.action_texts)
      same = same && e->redefine_action < e->tp.action_texts.size() &&
             e->tp.action_texts[e->redefine_action++] == t;
    for (auto& t : scratch.step_action_texts)
      same = same && e->redefine_step < e->tp.step_action_texts.size() &&
             e->tp.step_action_texts[e->redefine_step++] == t;
    if (!same) {
      e->redefining = false;
      std::string msg = "tracepoint " + std::to_string(e->tp.number) +
                        " is already defined with different actions (QTinit first to redefine)";
      console("gdbtrace: " + msg + "\n");
      return error_reply(msg);
    }
    if (!*more)
      e->redefining = false;
    return "OK";
  }
  if (e->complete)
    return error_reply("tracepoint " + std::to_string(e->tp.number) +
                       ": actions after the definition was complete");
  auto more = parse_actions(split->actions, e->stepping_seen, e->tp, verify_env());
  if (!more) {
    console("gdbtrace: " + more.error().message + "\n");
    // A half-defined tracepoint would trace the wrong thing: drop it.
    std::erase_if(tracepoints, [e](const auto& p) { return p.get() == e; });
    return error_reply(more.error().message);
  }
  if (!*more) {
    e->complete = true;
    if (running) {
      if (auto r = install(*e); !r) {
        console("gdbtrace: " + r.error().message + "\n");
        std::erase_if(tracepoints, [e](const auto& p) { return p.get() == e; });
        return error_reply(r.error().message);
      }
    }
  }
  return "OK";
}

std::string TraceEngine::Impl::cmd_qtdpsrc(std::string_view body) {
  auto src = parse_qtdp_source(body);
  if (!src)
    return error_reply(src.error().message);
  auto* e = find(src->number, src->address);
  if (!e)
    return error_reply("tracepoint " + std::to_string(src->number) + " at 0x" +
                       hex::u64(src->address) + " is not defined");
  // A re-sent identical definition re-sends its source strings too: keep one copy.
  if (e->dedupe_sources && e->redefine_source < e->tp.source.size() &&
      e->tp.source[e->redefine_source] == src->text &&
      e->tp.source_types[e->redefine_source] == src->type) {
    ++e->redefine_source;
    return "OK";
  }
  e->tp.source.push_back(src->text);
  e->tp.source_types.push_back(src->type);
  return "OK";
}

std::string TraceEngine::Impl::cmd_qtdv(std::string_view s) {
  uint64_t num = 0, value = 0, builtin = 0;
  if (!hex::take_u64(s, num) || !hex::take_char(s, ':') || !hex::take_u64(s, value) ||
      !hex::take_char(s, ':') || !hex::take_u64(s, builtin) || !hex::take_char(s, ':'))
    return error_reply("malformed QTDV: want QTDV:<n>:<value>:<builtin>:<name>");
  std::string name;
  if (!hex::decode_string(s, name))
    return error_reply("malformed QTDV: name is not hex");
  if (num == 0 || num > 0xffffffffu)
    return error_reply("trace state variable number out of range");
  auto& tsv = tsvs[uint32_t(num)];
  // Our $trace_timestamp keeps its clock even when gdb downloads it back.
  if (!tsv.builtin) {
    tsv.initial = int64_t(value);
    tsv.value = int64_t(value);
  }
  if (!name.empty())
    tsv.name = name;
  return "OK";
}

std::string TraceEngine::Impl::cmd_qtro(std::string_view s) {
  std::vector<std::pair<uint64_t, uint64_t>> regions;
  while (hex::take_char(s, ':')) {
    uint64_t start = 0, end = 0;
    if (!hex::take_u64(s, start) || !hex::take_char(s, ',') || !hex::take_u64(s, end))
      return error_reply("malformed QTro: want QTro:<start>,<end>...");
    regions.emplace_back(start, end);
  }
  if (!s.empty())
    return error_reply("malformed QTro");
  readonly_regions = std::move(regions);
  return "OK";
}

std::string TraceEngine::Impl::cmd_qtenable(std::string_view s, bool enable) {
  uint64_t num = 0, addr = 0;
  if (!hex::take_u64(s, num) || !hex::take_char(s, ':') || !hex::take_u64(s, addr))
    return error_reply("malformed QTEnable/QTDisable");
  auto* e = find(uint32_t(num), addr);
  if (!e)
    return error_reply("tracepoint " + std::to_string(num) + " at 0x" + hex::u64(addr) +
                       " is not defined");
  if (e->tp.enabled == enable)
    return "OK";
  if (e->installed && e->collector) {
    if (auto r = e->collector->set_enabled(e->tp.number, e->tp.address, enable); !r)
      return error_reply(r.error().message);
  }
  e->tp.enabled = enable;
  return "OK";
}

std::string TraceEngine::Impl::cmd_qtstart() {
  if (running)
    return error_reply("a trace run is already in progress (tstop first)");
  traced_pid = hooks.current_pid ? hooks.current_pid() : -1;
  if (traced_pid <= 0)
    return error_reply("no process to trace (start or attach to one first)");
  // gdb stops sending a tracepoint's actions when it cannot compile one
  // (e.g. "collect main": "don't know symbol class"), leaving the last QTDP
  // promising more. gdbserver runs such a tracepoint with the actions it got;
  // do the same, and say so, rather than refuse the whole run.
  for (auto& e : tracepoints)
    if (!e->complete) {
      e->complete = true;
      console("gdbtrace: tracepoint " + std::to_string(e->tp.number) +
              ": gdb sent no further actions; collecting the " +
              std::to_string(e->tp.actions.size()) + " it sent\n");
    }
  for (auto& e : tracepoints)
    if (auto r = check_tsv_references(e->tp); !r) {
      console("gdbtrace: " + r.error().message + "\n");
      return error_reply(r.error().message);
    }
  counters.clear();
  buffer.reserve_for_run();
  // Collectors may report frames from install() on: be running while installing.
  running = true;
  stop_pending = false;
  ever_ran = true;
  for (auto& e : tracepoints) {
    if (auto r = install(*e); !r) {
      running = false;
      for (auto& c : collectors)
        c->remove_all();
      for (auto& t : tracepoints)
        t->installed = false;
      console("gdbtrace: " + r.error().message + "\n");
      return error_reply(r.error().message);
    }
  }
  stop_reason = TraceStopReason::None;
  stop_text.clear();
  stop_tp = 0;
  start_time = trace_timestamp();
  stop_time = 0;
  arm_drain_timer();
  return "OK";
}

std::string TraceEngine::Impl::cmd_qtframe(std::string_view s) {
  uint64_t a = 0, b = 0;
  long found = -1;
  if (hex::take_prefix(s, "pc:")) {
    if (!hex::take_u64(s, a))
      return error_reply("malformed QTFrame:pc");
    found = buffer.find_pc(a, current_frame);
  } else if (bool inside = hex::take_prefix(s, "range:");
             inside || hex::take_prefix(s, "outside:")) {
    if (!hex::take_u64(s, a) || !hex::take_char(s, ':') || !hex::take_u64(s, b))
      return error_reply("malformed QTFrame range");
    found = buffer.find_range(a, b, inside, current_frame);
  } else if (hex::take_prefix(s, "tdp:")) {
    if (!hex::take_u64(s, a))
      return error_reply("malformed QTFrame:tdp");
    found = a > 0xffff ? -1 : buffer.find_tracepoint(uint16_t(a), current_frame);
  } else {
    if (!hex::take_u64(s, a))
      return error_reply("malformed QTFrame");
    if (int32_t(uint32_t(a)) == -1) {
      current_frame = -1;
      return "OK";
    }
    found = a < buffer.frame_count() ? long(a) : -1;
  }
  if (found < 0)
    return "F-1";
  current_frame = found;
  return "F" + hex::u64(uint64_t(found)) + "T" + hex::u64(buffer.frame_tp(found));
}

std::string TraceEngine::Impl::cmd_qtstatus() {
  drain_all();
  apply_pending_stop(); // a drain that filled the buffer ends the run now, not after this reply
  return format_qtstatus(status());
}

std::string TraceEngine::Impl::cmd_qtp(std::string_view s) {
  uint64_t num = 0, addr = 0;
  if (!hex::take_u64(s, num) || !hex::take_char(s, ':') || !hex::take_u64(s, addr))
    return error_reply("malformed qTP");
  auto* e = find(uint32_t(num), addr);
  if (!e)
    return error_reply("tracepoint " + std::to_string(num) + " at 0x" + hex::u64(addr) +
                       " is not defined");
  // Counts are kept per tracepoint number and gdb sums over locations: report
  // them on the first location only. (gdb parses hex; gdbserver 13 prints
  // decimal here, which gdb misreads.)
  if (e != first_with_number(e->tp.number))
    return "V0:0";
  auto c = counters[e->tp.number];
  if (e->collector)
    c.hits = std::max(c.hits, e->collector->stats(e->tp.number).hits);
  return "V" + hex::u64(c.hits) + ":" + hex::u64(c.bytes);
}

std::string TraceEngine::Impl::cmd_qtv(std::string_view s) {
  uint64_t num = 0;
  if (!hex::take_u64(s, num))
    return error_reply("malformed qTV");
  if (current_frame >= 0) {
    std::optional<int64_t> v;
    FrameView(buffer.frame(current_frame), register_block_size())
        .for_each([&](const FrameBlock& b) {
          if (b.type == 'V' && b.tsv == num)
            v = b.value; // the last one wins, as gdbserver
          return true;
        });
    return v ? "V" + hex::u64(uint64_t(*v)) : "U";
  }
  // Before the first run a variable has no value yet.
  if (!running && !ever_ran)
    return "U";
  auto it = tsvs.find(uint32_t(num));
  if (it == tsvs.end())
    return "U";
  std::optional<int64_t> v;
  for (auto& c : collectors)
    if ((v = c->tsv_value(uint32_t(num))))
      break;
  if (!v)
    v = get_tsv(uint32_t(num));
  return "V" + hex::u64(uint64_t(*v));
}

std::string TraceEngine::Impl::cmd_upload_tp(bool first) {
  if (first) {
    upload_tp = 0;
    upload_header_sent = false;
  }
  while (upload_tp < tracepoints.size()) {
    const Tracepoint& tp = tracepoints[upload_tp]->tp;
    std::string id = hex::u64(tp.number) + ":" + hex::u64(tp.address);
    if (!upload_header_sent) {
      upload_header_sent = true;
      upload_action = upload_step = upload_source = 0;
      std::string r = "T" + id + ":" + (tp.enabled ? "E" : "D") + ":" + hex::u64(tp.step_count) +
                      ":" + hex::u64(tp.pass_count);
      if (tp.fast)
        r += ":F" + hex::u64(tp.fast_min_len);
      if (tp.has_condition)
        r += ":X" + hex::u64(tp.condition.code.size()) + "," +
             hex::encode(tp.condition.code.data(), tp.condition.code.size());
      return r;
    }
    if (upload_action < tp.action_texts.size())
      return "A" + id + ":" + tp.action_texts[upload_action++];
    if (upload_step < tp.step_action_texts.size())
      return "S" + id + ":" + tp.step_action_texts[upload_step++];
    if (upload_source < tp.source.size()) {
      const std::string& text = tp.source[upload_source];
      const std::string& type = tp.source_types[upload_source++];
      return "Z" + id + ":" + type + ":0:" + hex::u64(text.size()) + ":" + hex::encode(text);
    }
    ++upload_tp;
    upload_header_sent = false;
  }
  return "l";
}

std::string TraceEngine::Impl::cmd_upload_tsv(bool first) {
  if (first)
    upload_tsv = tsvs.begin();
  else if (upload_tsv != tsvs.end())
    ++upload_tsv;
  if (upload_tsv == tsvs.end())
    return "l";
  const auto& [num, tsv] = *upload_tsv;
  return hex::u64(num) + ":" + hex::u64(uint64_t(tsv.initial)) + ":" + (tsv.builtin ? "1" : "0") +
         ":" + hex::encode(tsv.name);
}

std::string TraceEngine::Impl::cmd_qtbuffer(std::string_view s) {
  uint64_t offset = 0, len = 0;
  if (!hex::take_u64(s, offset) || !hex::take_char(s, ',') || !hex::take_u64(s, len))
    return error_reply("malformed qTBuffer");
  drain_all();
  auto bytes = buffer.bytes();
  if (offset == bytes.size())
    return "l";
  if (offset > bytes.size())
    return error_reply("qTBuffer offset beyond the trace data");
  size_t n = std::min<uint64_t>({len, bytes.size() - offset, kMaxBufferChunk});
  return hex::encode(bytes.data() + offset, n);
}

std::string TraceEngine::Impl::cmd_qtbuffer_size(std::string_view s) {
  if (running)
    return error_reply("cannot change the trace buffer size during a run");
  uint64_t size = TraceBuffer::kDefaultSize;
  if (s != "-1" && (!hex::take_u64(s, size) || !s.empty()))
    return error_reply("malformed QTBuffer:size");
  if (size > (uint64_t(1) << 34))
    return error_reply("trace buffer size over 16 GiB");
  current_frame = -1;
  buffer.set_capacity(size);
  return "OK";
}

std::string TraceEngine::Impl::cmd_qtnotes(std::string_view s) {
  while (!s.empty()) {
    std::string* field = nullptr;
    if (hex::take_prefix(s, "user:"))
      field = &user;
    else if (hex::take_prefix(s, "notes:"))
      field = &notes;
    else if (hex::take_prefix(s, "tstop:"))
      field = &stop_note;
    else
      break;
    size_t semi = s.find(';');
    std::string_view value = s.substr(0, semi);
    if (!hex::decode_string(value, *field))
      return error_reply("malformed QTNotes: not hex");
    s.remove_prefix(semi == std::string_view::npos ? s.size() : semi + 1);
  }
  return "OK";
}

TfileContents TraceEngine::Impl::tfile_contents() const {
  TfileContents c;
  c.regblock_size = register_block_size();
  if (hooks.target_description)
    c.tdesc_xml = hooks.target_description();
  c.status = status();
  for (const auto& [num, tsv] : tsvs)
    c.tsvs.push_back({num, tsv.initial, tsv.builtin, tsv.name});
  std::map<uint32_t, bool> counted;
  for (const auto& e : tracepoints) {
    TfileTracepoint t;
    t.tp = &e->tp;
    if (!counted[e->tp.number]) {
      counted[e->tp.number] = true;
      auto it = counters.find(e->tp.number);
      if (it != counters.end()) {
        t.hits = it->second.hits;
        t.frame_bytes = it->second.bytes;
      }
    }
    c.tracepoints.push_back(t);
  }
  return c;
}

std::string TraceEngine::Impl::cmd_qtsave(std::string_view s) {
  std::string path;
  if (!hex::decode_string(s, path) || path.empty())
    return error_reply("malformed QTSave");
  drain_all();
  auto r = write_tfile(path, tfile_contents(), buffer.bytes());
  if (!r)
    return error_reply(r.error().message);
  return "OK";
}

std::string TraceEngine::Impl::cmd_gdbtrace_frames(std::string_view s) {
  uint64_t offset = 0, len = 0;
  if (!hex::take_u64(s, offset) || !hex::take_char(s, ',') || !hex::take_u64(s, len))
    return error_reply("malformed qGdbtrace.frames: want qGdbtrace.frames:OFF,LEN");
  drain_all();
  auto bytes = buffer.bytes();
  if (offset > bytes.size())
    return error_reply("qGdbtrace.frames offset beyond the trace data");
  size_t n = std::min<uint64_t>({len, bytes.size() - offset, kMaxFramesChunk});
  std::string out(offset + n == bytes.size() ? "l" : "m");
  out.append(reinterpret_cast<const char*>(bytes.data() + offset), n);
  return out;
}

namespace {
std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\', out += c;
    else if (uint8_t(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else
      out += c;
  }
  return out + "\"";
}
} // namespace

std::string TraceEngine::Impl::status_json() {
  drain_all();
  TraceStatus st = status();
  std::string j = "{";
  j += "\"running\":" + std::string(running ? "true" : "false");
  j += ",\"stop_reason\":" + json_string(stop_reason_word(st));
  j += ",\"stop_text\":" + json_string(st.stop_text);
  j += ",\"stop_tracepoint\":" + std::to_string(st.stop_tp);
  j += ",\"buffer\":{\"size\":" + std::to_string(st.size) +
       ",\"used\":" + std::to_string(buffer.used()) + ",\"frames\":" + std::to_string(st.frames) +
       ",\"created\":" + std::to_string(st.created) +
       ",\"discarded\":" + std::to_string(buffer.frames_discarded()) +
       ",\"circular\":" + (st.circular ? "true" : "false") + "}";
  j += ",\"register_block_size\":" + std::to_string(register_block_size());
  j += ",\"tracepoints\":[";
  bool first = true;
  for (const auto& e : tracepoints) {
    auto c = counters[e->tp.number];
    CollectorStats cs;
    if (e->collector)
      cs = e->collector->stats(e->tp.number);
    j += first ? "" : ",";
    first = false;
    j += "{\"number\":" + std::to_string(e->tp.number) +
         ",\"address\":" + json_string("0x" + hex::u64(e->tp.address)) +
         ",\"enabled\":" + (e->tp.enabled ? "true" : "false") +
         ",\"fast\":" + (e->tp.fast ? "true" : "false") +
         ",\"backend\":" + json_string(e->collector ? e->collector->name() : "") +
         ",\"hits\":" + std::to_string(std::max(c.hits, cs.hits)) +
         ",\"frames\":" + std::to_string(c.frames) + ",\"bytes\":" + std::to_string(c.bytes) +
         ",\"drops\":" + std::to_string(c.drops + cs.drops) +
         ",\"errors\":" + std::to_string(c.errors + cs.errors) + "}";
  }
  j += "]}";
  return j;
}

std::optional<std::string> TraceEngine::handle_monitor(std::string_view command) {
  std::string_view s = command;
  while (!s.empty() && s.front() == ' ')
    s.remove_prefix(1);
  if (!hex::take_prefix(s, "gdbtrace"))
    return std::nullopt;
  if (!s.empty() && s.front() != ' ')
    return std::nullopt;
  while (!s.empty() && s.front() == ' ')
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n'))
    s.remove_suffix(1);
  Impl& m = *impl_;
  if (hex::take_prefix(s, "backend")) {
    while (!s.empty() && s.front() == ' ')
      s.remove_prefix(1);
    if (s.empty()) {
      std::string out = "backend selection: " +
                        (m.preferred_backend.empty() ? std::string("auto") : m.preferred_backend) +
                        "\n";
      if (m.collectors.empty())
        out += "  (no collectors available)\n";
      for (auto& c : m.collectors)
        out += "  " + c->name() + ": " + c->describe() + "\n";
      return out;
    }
    if (s == "auto") {
      m.preferred_backend.clear();
      return std::string(
          "backend selection: auto (first collector that accepts each tracepoint)\n");
    }
    for (auto& c : m.collectors)
      if (c->name() == s) {
        m.preferred_backend = std::string(s);
        return "backend selection: " + m.preferred_backend +
               (m.running ? " (applies to tracepoints installed from now on)\n" : "\n");
      }
    std::string names;
    for (auto& c : m.collectors)
      names += " " + c->name();
    return "gdbtrace: no backend '" + std::string(s) + "'; available:" + names + " auto\n";
  }
  if (s == "status") {
    m.drain_all();
    TraceStatus st = m.status();
    std::string out = std::string("trace ") + (m.running ? "running" : "not running") +
                      (m.ever_ran && !m.running ? std::string(", stopped: ") + stop_reason_word(st)
                                                : std::string()) +
                      "\n";
    out += "buffer: " + std::to_string(m.buffer.used()) + " of " + std::to_string(st.size) +
           " bytes, " + std::to_string(st.frames) + " frames (" + std::to_string(st.created) +
           " created, " + std::to_string(m.buffer.frames_discarded()) + " discarded)" +
           (st.circular ? ", circular" : "") + "\n";
    for (const auto& e : m.tracepoints) {
      auto c = m.counters[e->tp.number];
      CollectorStats cs;
      if (e->collector)
        cs = e->collector->stats(e->tp.number);
      out += "tracepoint " + std::to_string(e->tp.number) + " at 0x" + hex::u64(e->tp.address) +
             (e->tp.enabled ? "" : " (disabled)") + ": backend " +
             (e->collector ? e->collector->name() : std::string("-")) + ", hits " +
             std::to_string(std::max(c.hits, cs.hits)) + ", frames " + std::to_string(c.frames) +
             ", drops " + std::to_string(c.drops + cs.drops) + ", errors " +
             std::to_string(c.errors + cs.errors) + "\n";
    }
    return out;
  }
  return std::string("gdbtrace: unknown command; use: monitor gdbtrace backend "
                     "[NAME|auto] | monitor gdbtrace status\n");
}

} // namespace gdbtrace
