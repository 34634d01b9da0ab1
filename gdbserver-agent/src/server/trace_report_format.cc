#include "server/trace_report_format.h"

#include <algorithm>
#include <cstdio>

#include "common/hex.h"

namespace gdbtrace {

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

const char* json_bool(bool b) {
  return b ? "true" : "false";
}

std::string tracepoint_json(const TracepointReport& t) {
  return "{\"number\":" + std::to_string(t.number) +
         ",\"address\":" + json_string("0x" + hex::u64(t.address)) +
         ",\"enabled\":" + json_bool(t.enabled) + ",\"fast\":" + json_bool(t.fast) +
         ",\"backend\":" + json_string(t.backend) + ",\"hits\":" + std::to_string(t.hits) +
         ",\"frames\":" + std::to_string(t.frames) + ",\"bytes\":" + std::to_string(t.bytes) +
         ",\"drops\":" + std::to_string(t.drops) +
         ",\"after_stop\":" + std::to_string(t.after_stop) +
         ",\"errors\":" + std::to_string(t.errors) + ",\"emulated\":" + std::to_string(t.emulated) +
         "}";
}

} // namespace

std::string format_report_json(const TraceReport& r) {
  const TraceStatus& st = r.status;
  std::string j = "{";
  j += "\"running\":" + std::string(json_bool(st.running));
  j += ",\"stop_reason\":" + json_string(stop_reason_word(st));
  j += ",\"stop_text\":" + json_string(st.stop_text);
  j += ",\"stop_tracepoint\":" + std::to_string(st.stop_tp);
  j += ",\"buffer\":{\"size\":" + std::to_string(st.size) +
       ",\"used\":" + std::to_string(r.buffer_used) +
       ",\"stream\":" + std::to_string(r.stream_bytes) +
       ",\"frames\":" + std::to_string(st.frames) + ",\"created\":" + std::to_string(st.created) +
       ",\"discarded\":" + std::to_string(r.frames_discarded) +
       ",\"circular\":" + json_bool(st.circular) + "}";
  j += ",\"register_block_size\":" + std::to_string(r.register_block_size);
  j += ",\"stacks\":" + std::to_string(r.stack_bytes);
  j += ",\"fallback\":" + json_string(r.fallback);
  j += ",\"drain\":" + json_string(r.drain);
  j += ",\"streaming\":{\"path\":" + json_string(r.stream.path) +
       ",\"writing\":" + json_bool(r.stream.writing) +
       ",\"frames\":" + std::to_string(r.stream.frames) +
       ",\"bytes\":" + std::to_string(r.stream.bytes) +
       ",\"lost\":" + std::to_string(r.stream.lost) + ",\"error\":" + json_string(r.stream.error) +
       ",\"direct\":" + json_bool(r.stream.direct) +
       ",\"longest_disk_wait_us\":" + std::to_string(r.stream.longest_disk_wait_us) +
       ",\"longest_write_us\":" + std::to_string(r.stream.longest_write_us) + "}";
  j += ",\"drops_by_cpu\":[";
  for (size_t cpu = 0; cpu < r.drops_by_cpu.size(); ++cpu)
    j += (cpu ? "," : "") + std::to_string(r.drops_by_cpu[cpu]);
  j += "]";
  j += ",\"tracepoints\":[";
  for (size_t i = 0; i < r.tracepoints.size(); ++i)
    j += (i ? "," : "") + tracepoint_json(r.tracepoints[i]);
  return j + "]}";
}

// "stream: ..." for `monitor gdbtrace stream` and `monitor gdbtrace status`.
std::string format_stream_line(const StreamReport& s, bool running) {
  if (s.path.empty())
    return "stream: off\n";
  std::string out = "stream: " + s.path;
  if (s.writing)
    out += ", writing: " + std::to_string(s.frames) + " frames, " + std::to_string(s.bytes) +
           " bytes so far";
  else if (s.frames || s.bytes)
    out += ", last run: " + std::to_string(s.frames) + " frames, " + std::to_string(s.bytes) +
           " bytes";
  if (s.direct)
    out += ", written directly (O_DIRECT)";
  if (s.longest_write_us >= 100000) // a stall the stages may not hold at a busy trace's rate
    out += ", a write took up to " + std::to_string(s.longest_write_us / 1000) + " ms";
  if (s.longest_disk_wait_us >= 1000) // shown once it could matter: the rings hold ~0.5 s
    out += ", the drain waited up to " + std::to_string(s.longest_disk_wait_us / 1000) +
           " ms for the disk";
  if (s.lost)
    out += ", " + std::to_string(s.lost) + " frames lost before they were written";
  if (!s.error.empty())
    out += " (stopped early: " + s.error + ")";
  if (!s.writing && !running)
    out += " (each tstart rewrites it)";
  return out + "\n";
}

std::string format_report_text(const TraceReport& r) {
  const TraceStatus& st = r.status;
  std::string out = std::string("trace ") + (st.running ? "running" : "not running") +
                    (st.ever_ran && !st.running ? std::string(", stopped: ") + stop_reason_word(st)
                                                : std::string()) +
                    "\n";
  out += "buffer: " + std::to_string(r.buffer_used) + " of " + std::to_string(st.size) +
         " bytes, " + std::to_string(st.frames) + " frames (" + std::to_string(st.created) +
         " created, " + std::to_string(r.frames_discarded) + " discarded)" +
         (st.circular ? ", circular" : "") + "\n";
  out += r.stack_bytes
             ? "stacks: on, " + std::to_string(r.stack_bytes) + " bytes from $sp per hit\n"
             : std::string("stacks: off\n");
  out += format_stream_line(r.stream, st.running);
  if (std::any_of(r.drops_by_cpu.begin(), r.drops_by_cpu.end(), [](uint64_t n) { return n; })) {
    out += "drops by CPU (staging ring full):";
    for (size_t cpu = 0; cpu < r.drops_by_cpu.size(); ++cpu)
      out += (cpu ? ", cpu" : " cpu") + std::to_string(cpu) + " " +
             std::to_string(r.drops_by_cpu[cpu]);
    out += "\n";
  }
  if (!r.drain.empty())
    out += r.drain + "\n";
  if (!r.fallback.empty())
    out += "fallback: " + r.fallback + "\n";
  for (const auto& t : r.tracepoints)
    out += "tracepoint " + std::to_string(t.number) + " at 0x" + hex::u64(t.address) +
           (t.enabled ? "" : " (disabled)") + ": backend " +
           (t.backend.empty() ? std::string("-") : t.backend) + ", hits " + std::to_string(t.hits) +
           ", frames " + std::to_string(t.frames) + ", drops " + std::to_string(t.drops) +
           ", after stop " + std::to_string(t.after_stop) + ", errors " + std::to_string(t.errors) +
           (t.emulated ? ", emulated " + std::to_string(t.emulated) : std::string()) +
           (t.note.empty() ? std::string() : " (" + t.note + ")") + "\n";
  return out;
}

} // namespace gdbtrace
