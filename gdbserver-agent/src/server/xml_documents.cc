#include "server/xml_documents.h"

#include "common/hex.h"
#include "server/packet_parsers.h"

namespace gdbtrace {

std::string xml_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '&':
      out += "&amp;";
      break;
    case '"':
      out += "&quot;";
      break;
    case '\'':
      out += "&apos;";
      break;
    default:
      // Control characters are not valid XML 1.0; thread names may hold anything.
      if (static_cast<unsigned char>(c) < 0x20 && c != '\t') {
        out += '?';
      } else {
        out.push_back(c);
      }
    }
  }
  return out;
}

std::string threads_xml(const std::vector<ThreadInfo>& threads, bool multiprocess) {
  std::string out = "<?xml version=\"1.0\"?>\n<threads>\n";
  for (const auto& t : threads) {
    out += "<thread id=\"" + format_thread_id(t.id, multiprocess) + "\"";
    if (t.core >= 0)
      out += " core=\"" + std::to_string(t.core) + "\"";
    if (!t.name.empty())
      out += " name=\"" + xml_escape(t.name) + "\"";
    out += "/>\n";
  }
  out += "</threads>\n";
  return out;
}

std::string libraries_svr4_xml(const std::vector<LibraryInfo>& libraries, uint64_t main_lm) {
  auto hex = [](uint64_t v) { return "0x" + hex::u64(v); };
  std::string out = "<library-list-svr4 version=\"1.0\"";
  if (main_lm)
    out += " main-lm=\"" + hex(main_lm) + "\"";
  out += ">";
  for (const auto& lib : libraries) {
    out += "<library name=\"" + xml_escape(lib.name) + "\" lm=\"" + hex(lib.lm) + "\" l_addr=\"" +
           hex(lib.l_addr) + "\" l_ld=\"" + hex(lib.l_ld) + "\" lmid=\"" + hex(lib.lmid) + "\"/>";
  }
  out += "</library-list-svr4>";
  return out;
}

} // namespace gdbtrace
