#include "rsp/connection.h"

#include <cstdio>
#include <vector>

#include "common/debug_format.h"

namespace gdbtrace::rsp {

std::string printable(std::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

Connection::Connection(std::unique_ptr<Transport> transport, size_t max_payload)
    : transport_(std::move(transport)), decoder_(max_payload) {}

void Connection::start(Callbacks callbacks) {
  callbacks_ = std::move(callbacks);
  read_more();
}

void Connection::read_more() {
  if (closed_)
    return;
  auto self = shared_from_this();
  transport_->async_read_some([self](std::error_code ec, std::string_view bytes) {
    if (self->closed_)
      return;
    if (ec) {
      self->close();
      return;
    }
    self->handle_bytes(bytes);
    self->read_more();
  });
}

void Connection::handle_bytes(std::string_view bytes) {
  std::vector<PacketDecoder::Event> events;
  decoder_.feed(bytes, events);
  // Handlers may close the connection; stop delivering once that happened.
  for (auto& event : events) {
    if (closed_)
      return;
    switch (event.kind) {
    case PacketDecoder::Event::Packet:
      if (log_)
        log("getpkt: \"" + printable(event.payload) + "\"" + (no_ack_ ? "" : " [sending ack]"));
      if (!no_ack_)
        write_raw("+");
      callbacks_.on_packet(event.payload);
      break;
    case PacketDecoder::Event::Interrupt:
      log("getpkt: interrupt (\\x03)");
      callbacks_.on_interrupt();
      break;
    case PacketDecoder::Event::Ack:
      break;
    case PacketDecoder::Event::Nack:
      if (!no_ack_ && !last_sent_.empty()) {
        log("received '-': retransmitting");
        write_raw(last_sent_);
      }
      break;
    case PacketDecoder::Event::BadChecksum:
      log("getpkt: bad checksum in \"" + printable(event.payload) + "\"");
      if (!no_ack_)
        write_raw("-");
      break;
    case PacketDecoder::Event::Oversize:
      // Ack it (gdb must not resend it) and answer with an error, like any bad packet.
      log("getpkt: packet longer than PacketSize, rejected");
      if (!no_ack_)
        write_raw("+");
      send_packet("E.packet too long");
      break;
    }
  }
}

void Connection::send_packet(std::string_view payload) {
  if (closed_)
    return;
  std::string framed = frame_packet(payload, true);
  if (log_) // rendering a large binary reply for a log nobody reads is the main cost of bulk reads
    log("putpkt: \"" + printable(framed) + "\"" + (no_ack_ ? " [noack mode]" : ""));
  last_sent_ = framed;
  write_raw(framed);
}

void Connection::send_notification(std::string_view payload) {
  if (closed_)
    return;
  std::string framed = frame_packet(payload, true, '%');
  log("putpkt: \"" + printable(framed) + "\" [notif]");
  write_raw(framed); // notifications are never acked
}

void Connection::write_raw(const std::string& bytes) {
  if (closed_)
    return;
  if (auto ec = transport_->write_all(bytes)) {
    log("write failed: " + ec.message());
    close();
  }
}

void Connection::close() {
  if (closed_)
    return;
  closed_ = true;
  transport_->close();
  if (callbacks_.on_close) {
    auto cb = std::move(callbacks_.on_close);
    cb();
  }
}

void Connection::log(const std::string& line) const {
  if (log_)
    debug_line("remote", line);
}

} // namespace gdbtrace::rsp
