#include "trace/tfile_writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "common/hex.h"

namespace gdbtrace {
namespace {

std::string source_line(const Tracepoint& tp, const std::string& type, const std::string& text) {
  // gdb's encode_source_string: "N:ADDR:TYPE:START:LEN:HEX".
  return "tp Z" + hex::u64(tp.number) + ":" + hex::u64(tp.address) + ":" + type +
         ":0:" + hex::u64(text.size()) + ":" + hex::encode(text) + "\n";
}

// COUNT in hex, 16 digits when the header must keep its width.
std::string count(uint64_t v, bool fixed) {
  std::string digits = hex::u64(v);
  return fixed && digits.size() < 16 ? std::string(16 - digits.size(), '0') + digits : digits;
}

// ROOM bytes of "tdesc <!-- ... -->" lines (each under gdb's 1000-character
// line limit), or "" when ROOM cannot be made of such lines.
constexpr size_t kPadLineMin = 14; // "tdesc <!---->\n"
constexpr size_t kPadLineMax = 960;
std::string pad_lines(size_t room) {
  if (room < kPadLineMin)
    return {};
  size_t lines = (room + kPadLineMax - 1) / kPadLineMax;
  std::string out;
  out.reserve(room);
  for (size_t i = 0; i < lines; ++i) {
    size_t len = room / lines + (i < room % lines ? 1 : 0);
    out += "tdesc <!--" + std::string(len - kPadLineMin, ' ') + "-->\n";
  }
  return out;
}

} // namespace

std::string tfile_status_line(const TfileContents& c) {
  std::string line = format_tfile_status(c.status);
  line.pop_back(); // its '\n'
  line += c.status_extra;
  if (!c.fixed_width)
    return line + "\n";
  // gdb skips an optional field it does not know, to the next ';' or the end.
  const std::string pad = ";gdbtrace_pad:";
  if (line.size() + pad.size() >= kTfileStatusWidth) {
    // Long notes or stop text: keep the counts, which a reader needs more.
    TraceStatus shorter = c.status;
    shorter.notes.clear();
    shorter.user.clear();
    shorter.stop_text = shorter.stop_text.substr(0, 200);
    line = format_tfile_status(shorter);
    line.pop_back();
    line += c.status_extra.substr(0, 200);
  }
  line += pad + std::string(kTfileStatusWidth - line.size() - pad.size(), '0');
  return line + "\n";
}

std::string tfile_header(const TfileContents& c) {
  std::string out = "\x7fTRACE0\n";
  out += "R " + hex::u64(c.regblock_size) + "\n";
  size_t pos = 0;
  while (pos < c.tdesc_xml.size()) {
    size_t nl = c.tdesc_xml.find('\n', pos);
    if (nl == std::string::npos)
      nl = c.tdesc_xml.size();
    out += "tdesc " + c.tdesc_xml.substr(pos, nl - pos) + "\n";
    pos = nl + 1;
  }
  out += tfile_status_line(c);
  for (const auto& v : c.tsvs)
    out += "tsv " + hex::u64(v.number) + ":" + hex::u64(uint64_t(v.initial)) + ":" +
           (v.builtin ? "1" : "0") + ":" + hex::encode(v.name) + "\n";
  for (const auto& entry : c.tracepoints) {
    const Tracepoint& tp = *entry.tp;
    std::string id = hex::u64(tp.number) + ":" + hex::u64(tp.address);
    out += "tp T" + id + ":" + (tp.enabled ? "E" : "D") + ":" + hex::u64(tp.step_count) + ":" +
           hex::u64(tp.pass_count);
    if (tp.fast)
      out += ":F" + hex::u64(tp.fast_min_len);
    if (tp.has_condition)
      out += ":X" + hex::u64(tp.condition.code.size()) + "," +
             hex::encode(tp.condition.code.data(), tp.condition.code.size());
    out += "\n";
    for (const auto& a : tp.action_texts)
      out += "tp A" + id + ":" + a + "\n";
    for (const auto& a : tp.step_action_texts)
      out += "tp S" + id + ":" + a + "\n";
    for (size_t i = 0; i < tp.source.size(); ++i)
      out += source_line(tp, i < tp.source_types.size() ? tp.source_types[i] : "cmd", tp.source[i]);
    out += "tp V" + id + ":" + count(entry.hits, c.fixed_width) + ":" +
           count(entry.frame_bytes, c.fixed_width) + "\n";
  }
  if (c.pad_to > out.size() + 1 && !c.tdesc_xml.empty())
    out += pad_lines(c.pad_to - out.size() - 1);
  out += "\n";
  return out;
}

Result<void> write_tfile(const std::string& path, const TfileContents& contents,
                         const FrameStreamWriter& frames) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), std::fclose);
  if (!f)
    return make_error(errno, "cannot create " + path + ": " + std::strerror(errno));
  std::string header = tfile_header(contents);
  static const uint8_t end_marker[4] = {0, 0, 0, 0};
  bool good = std::fwrite(header.data(), 1, header.size(), f.get()) == header.size();
  if (good)
    frames([&](std::span<const uint8_t> piece) {
      good = std::fwrite(piece.data(), 1, piece.size(), f.get()) == piece.size();
      return good;
    });
  good = good && std::fwrite(end_marker, 1, 4, f.get()) == 4;
  int err = errno;
  if (std::fclose(f.release()) != 0 || !good)
    return make_error(err ? err : EIO, "cannot write " + path + ": " + std::strerror(err));
  return ok();
}

} // namespace gdbtrace
