// RSP framing: checksums, binary escaping, run-length encoding and a streaming
// decoder that turns raw bytes from gdb into packets, acks and interrupts.
//
// Pure functions and a byte-fed state machine, so the codec is unit-testable
// without sockets and cannot be driven into unbounded memory use.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gdbtrace::rsp {

uint8_t checksum(std::string_view payload);

// Escapes '$', '#', '}' and '*' as '}' followed by the byte xor 0x20 (binary
// data in X packets, vFile and qXfer replies).
std::string escape_binary(std::string_view data);
// Reverses escape_binary; nullopt when the data ends in a lone '}'.
std::optional<std::string> unescape_binary(std::string_view data);

// Run-length encodes a payload the way gdbserver does: a run of a character
// followed by N >= 3 repeats becomes c '*' (N+29), never producing '#' or '$'.
std::string run_length_encode(std::string_view payload);
// Expands run-length encoding; nullopt when malformed.
std::optional<std::string> run_length_decode(std::string_view payload);

// "$payload#cs" (or '%' for notifications).
std::string frame_packet(std::string_view payload, bool rle, char start = '$');

class PacketDecoder {
public:
  struct Event {
    enum Kind { Packet, Interrupt, Ack, Nack, BadChecksum, Oversize } kind;
    std::string payload; // Packet only (raw payload, still escaped)
  };

  explicit PacketDecoder(size_t max_payload) : max_payload_(max_payload) {}
  // Consumes BYTES, appending recognised events to OUT in order.
  void feed(std::string_view bytes, std::vector<Event>& out);
  bool in_packet() const { return state_ != State::Idle; }

private:
  enum class State { Idle, Payload, Checksum1, Checksum2 };
  size_t max_payload_;
  State state_ = State::Idle;
  std::string payload_;
  bool oversize_ = false;
  int sum_hi_ = 0;
};

} // namespace gdbtrace::rsp
