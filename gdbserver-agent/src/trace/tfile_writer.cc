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

} // namespace

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
  out += format_tfile_status(c.status);
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
    out += "tp V" + id + ":" + hex::u64(entry.hits) + ":" + hex::u64(entry.frame_bytes) + "\n";
  }
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
