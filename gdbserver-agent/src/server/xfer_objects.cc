// The qXfer objects the server serves, one row each: the object, its annex
// rules and how its document is made. Reads share one handler that parses
// qXfer:OBJECT:read:ANNEX:OFFSET,LENGTH and cuts the 'm'/'l' reply from the
// whole document. siginfo is also written.
#include <asio.hpp>

#include "common/hex.h"
#include "server/gdb_server.h"
#include "server/packet_parsers.h"
#include "server/tdesc.h"
#include "server/xml_documents.h"
#include "trace/trace_engine.h"

namespace gdbtrace {

// A packet-table row for qXfer object reads: NAME is "qXfer:OBJECT:read:",
// FEATURE its qSupported entry; READ makes the whole document for a request.
PacketRow GdbServer::xfer_read_row(std::string_view name, std::string_view feature,
                                   XferReader read) {
  return PacketRow::prefix(name, [this, read = std::move(read)](
                                     const Packet& p) { return handle_qxfer(p.text, read); })
      .advertise(feature)
      .binary();
}

// The process a document is about, or an error when there is none.
Result<Pid> GdbServer::xfer_process() const {
  Pid pid = current_pid();
  if (pid <= 0)
    return make_error(ESRCH, "no process");
  return pid;
}

std::vector<PacketRow> GdbServer::xfer_rows() {
  std::vector<PacketRow> rows = {
      // Only target.xml: the current process's layout (amd64 or i386, with or
      // without AVX); gdb reads it again after a stop of a new process or an exec.
      xfer_read_row("qXfer:features:read:", "qXfer:features:read+",
                    [this](const XferRequest& req) -> Result<std::string> {
                      if (req.annex != "target.xml")
                        return make_error(ENOENT, "unknown annex " + req.annex);
                      // No process: the description of the trace the stub still holds
                      // (gdb's tsave writes it into the file), or, before any (a --multi
                      // stub before `run`), none, as gdbserver: gdb keeps the executable's
                      // architecture (an i386 program's, which an x86-64 description
                      // would make it reject).
                      if (target_.processes().empty()) {
                        if (!engine_ || engine_->frame_count() == 0)
                          return make_error(ESRCH, "no process");
                        return target_xml(engine_->register_layout());
                      }
                      return target_xml(register_layout());
                    }),
      xfer_read_row("qXfer:threads:read:", "qXfer:threads:read+",
                    [this](const XferRequest&) -> Result<std::string> {
                      return threads_xml(target_.threads(), multiprocess_);
                    }),
      // The annex is a hex pid; empty: the current process.
      xfer_read_row("qXfer:exec-file:read:", "qXfer:exec-file:read+",
                    [this](const XferRequest& req) -> Result<std::string> {
                      Pid pid = current_pid();
                      if (!req.annex.empty()) {
                        auto v = hex::parse_u64(req.annex);
                        if (!v || *v > 0x7fffffff)
                          return make_error(EINVAL, "bad pid");
                        pid = static_cast<Pid>(*v);
                      }
                      if (pid <= 0)
                        return make_error(ESRCH, "no process");
                      return target_.exec_file(pid);
                    }),
      xfer_read_row("qXfer:auxv:read:", "qXfer:auxv:read+",
                    [this](const XferRequest&) -> Result<std::string> {
                      auto pid = xfer_process();
                      if (!pid)
                        return pid.error();
                      return target_.auxv(*pid);
                    }),
      xfer_read_row("qXfer:libraries-svr4:read:", "qXfer:libraries-svr4:read+",
                    [this](const XferRequest&) -> Result<std::string> {
                      auto pid = xfer_process();
                      if (!pid)
                        return pid.error();
                      uint64_t main_lm = 0;
                      auto libs = target_.libraries(*pid, main_lm);
                      if (!libs)
                        return libs.error();
                      return libraries_svr4_xml(*libs, main_lm);
                    }),
      xfer_read_row("qXfer:siginfo:read:", "qXfer:siginfo:read+",
                    [this](const XferRequest&) -> Result<std::string> {
                      if (auto pid = xfer_process(); !pid)
                        return pid.error();
                      return target_.read_siginfo(general_thread());
                    }),
      // Host tables, read from a snapshot taken at offset 0. An unknown type
      // reads as an empty document, as from gdbserver: gdb then warns "Empty
      // data returned by target.  Wrong osdata type?".
      xfer_read_row("qXfer:osdata:read:", "qXfer:osdata:read+",
                    [this](const XferRequest& req) -> Result<std::string> {
                      const std::string* snapshot = osdata_.read(req.annex, req.offset);
                      return snapshot ? *snapshot : std::string();
                    }),
  };
  if (engine_)
    rows.push_back(xfer_read_row("qXfer:traceframe-info:read:", "qXfer:traceframe-info:read+",
                                 [this](const XferRequest&) -> Result<std::string> {
                                   return state().traceframe_info();
                                 })
                       .reads_state());
  // The one object gdb writes: `set $_siginfo...`. The data is binary.
  rows.push_back(PacketRow::prefix("qXfer:siginfo:write:",
                                   [this](const Packet& p) { return handle_siginfo_write(p.args); })
                     .binary_data("E.malformed qXfer write")
                     .advertise("qXfer:siginfo:write+"));
  return rows;
}

// qXfer:OBJECT:read:ANNEX:OFFSET,LENGTH -> 'm'/'l' + the requested piece of
// the document READ makes.
GdbServer::Reply GdbServer::handle_qxfer(std::string_view packet, const XferReader& read) {
  auto req = parse_qxfer_read(packet);
  if (!req)
    return "E.malformed qXfer packet";
  Result<std::string> doc = read(*req);
  if (!doc)
    return "E." + doc.error().message;
  if (req->offset >= doc->size())
    return "l";
  // Escaping may double the data; keep the reply within PacketSize.
  uint64_t len = std::min<uint64_t>(req->length, kPacketSize / 2 - 16);
  std::string_view chunk = std::string_view(*doc).substr(req->offset, len);
  bool last = req->offset + chunk.size() >= doc->size();
  return std::string(last ? "l" : "m") + std::string(chunk);
}

// qXfer:siginfo:write::OFFSET:DATA — patches the stopped thread's siginfo.
GdbServer::Reply GdbServer::handle_siginfo_write(std::string_view rest) {
  auto parts = split(rest, ':');
  if (parts.size() < 3 || !parts[0].empty())
    return "E.malformed qXfer write";
  auto offset = hex::parse_u64(parts[1]);
  size_t data_pos = rest.find(':', parts[0].size() + 1 + parts[1].size()) + 1;
  std::string_view data = rest.substr(data_pos); // unescaped by the table
  if (!offset)
    return "E.malformed qXfer write";
  ThreadId t = general_thread();
  auto current = target_.read_siginfo(t);
  if (!current)
    return "E." + current.error().message;
  if (*offset + data.size() > current->size())
    return "E.write beyond siginfo";
  current->replace(*offset, data.size(), std::string(data));
  auto w = target_.write_siginfo(t, *current);
  if (!w)
    return "E." + w.error().message;
  return hex::u64(data.size());
}

} // namespace gdbtrace
