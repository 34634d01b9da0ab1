// One gdb connection: framing, acks (until QStartNoAckMode), retransmission
// on '-', interrupts, notifications and the --remote-debug packet log.
//
// Bytes come from a Transport; complete packets go to the on_packet callback
// one at a time, in order. Replies are framed with run-length encoding.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "rsp/packet_codec.h"
#include "rsp/transport.h"

namespace gdbtrace::rsp {

class Connection : public std::enable_shared_from_this<Connection> {
public:
  struct Callbacks {
    std::function<void(std::string_view payload)> on_packet;
    std::function<void()> on_interrupt;
    std::function<void()> on_close; // peer went away or close() was called
  };

  Connection(std::unique_ptr<Transport> transport, size_t max_payload);
  void start(Callbacks callbacks);

  void send_packet(std::string_view payload);
  void send_notification(std::string_view payload); // "%payload#cs"
  void set_no_ack(bool no_ack) { no_ack_ = no_ack; }
  bool no_ack() const { return no_ack_; }
  void set_log(bool log) { log_ = log; }
  void close();
  bool closed() const { return closed_; }
  // gdb closed its end, and the stub has not read that yet (Transport::peer_hung_up).
  bool peer_hung_up() const { return !closed_ && transport_->peer_hung_up(); }

private:
  void read_more();
  void handle_bytes(std::string_view bytes);
  void write_raw(const std::string& bytes);
  void log(const std::string& line) const;

  std::unique_ptr<Transport> transport_;
  PacketDecoder decoder_;
  Callbacks callbacks_;
  std::string last_sent_; // for retransmission on '-'
  bool no_ack_ = false;
  bool log_ = false;
  bool closed_ = false;
};

// Printable rendering of packet bytes for logs.
std::string printable(std::string_view bytes);

} // namespace gdbtrace::rsp
