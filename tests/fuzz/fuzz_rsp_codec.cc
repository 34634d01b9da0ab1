// libFuzzer target: the RSP framing layer (rsp/packet_codec.h) on bytes as
// they come off the wire, split into chunks at fuzzer-chosen points.
//
// Checks, beyond "no crash, no sanitizer report":
//  - the decoder never yields a payload longer than its limit;
//  - every packet it yields re-frames to bytes that decode to the same payload;
//  - escape/unescape and run-length encode/decode are inverse where defined.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "rsp/packet_codec.h"

using gdbtrace::rsp::PacketDecoder;
namespace rsp = gdbtrace::rsp;

namespace {

constexpr size_t kMaxPayload = 4096;

void check(bool ok) {
  if (!ok)
    std::abort();
}

void check_round_trips(const std::string& payload) {
  // A decoded payload is still escaped: it must unescape (or be rejected) without crashing,
  // and whatever unescapes must escape back to bytes that unescape to it again.
  if (auto raw = rsp::unescape_binary(payload)) {
    auto again = rsp::unescape_binary(rsp::escape_binary(*raw));
    check(again && *again == *raw);
  }
  if (auto expanded = rsp::run_length_decode(payload)) {
    auto back = rsp::run_length_decode(rsp::run_length_encode(*expanded));
    check(back && *back == *expanded);
  }
  // Framing what we received and decoding it again gives the same payload.
  PacketDecoder decoder(kMaxPayload);
  std::vector<PacketDecoder::Event> events;
  decoder.feed(rsp::frame_packet(payload, false), events);
  check(events.size() == 1 && events[0].kind == PacketDecoder::Event::Packet &&
        events[0].payload == payload);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  // The first byte chooses the chunk size, so packets straddle feed() calls.
  size_t chunk = 1 + data[0] % 64;
  std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  PacketDecoder decoder(kMaxPayload);
  std::vector<PacketDecoder::Event> events;
  for (size_t off = 0; off < bytes.size(); off += chunk)
    decoder.feed(bytes.substr(off, chunk), events);
  for (const auto& e : events) {
    check(e.payload.size() <= kMaxPayload);
    if (e.kind == PacketDecoder::Event::Packet)
      check_round_trips(e.payload);
  }
  return 0;
}
